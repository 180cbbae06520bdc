// EXPERIMENT (session 18): up to two byte ranges a later kernel reads (weights), requested into L2 by an
// earlier kernel's CTAs while they wait (prefetch_l2_share, device_math.cuh).
#pragma once
#include <cstdint>

namespace striker::cuda {

struct L2Prefetch {
  const void* p[2] = {nullptr, nullptr};
  int64_t bytes[2] = {0, 0};
  bool any() const { return p[0] != nullptr || p[1] != nullptr; }
};

}  // namespace striker::cuda
