#include <cmath>

#include "backends/cuda/elementwise/elementwise.h"

namespace striker::cuda {

void swiglu_act_ref(const std::vector<bf16>& g, const std::vector<bf16>& u, std::vector<bf16>& act) {
  act.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const float gv = bf16_to_float(g[i]);
    act[i] = float_to_bf16(round_bf16(gv / (1.0f + std::exp(-gv))) * bf16_to_float(u[i]));
  }
}

}  // namespace striker::cuda
