#include "backends/cuda/moe/expert_items.h"

#include <cstddef>

namespace striker::cuda {

std::vector<ExpertItemRef> expert_items_ref(const std::vector<int32_t>& ids) {
  std::vector<ExpertItemRef> items;
  for (int s = 0; s < int(ids.size()); ++s) {
    ExpertItemRef* found = nullptr;
    for (auto& it : items)
      if (it.expert == ids[std::size_t(s)]) found = &it;
    if (found == nullptr) {
      items.push_back(ExpertItemRef{ids[std::size_t(s)], {}});
      found = &items.back();
    }
    found->slots.push_back(s);
  }
  return items;
}

}  // namespace striker::cuda
