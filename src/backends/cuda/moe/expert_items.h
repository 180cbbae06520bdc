// Host side of expert_items.cuh: the CPU reference of the grouping of a decode step's slots by
// expert (built into the tests only, expert_items_ref.cpp).
#pragma once
#include <cstdint>
#include <vector>

namespace striker::cuda {

struct ExpertItemRef {
  int32_t expert;
  std::vector<int> slots;  // ascending
};

// The distinct experts of ids in the order of first appearance, each with the slots that chose it.
std::vector<ExpertItemRef> expert_items_ref(const std::vector<int32_t>& ids);

}  // namespace striker::cuda
