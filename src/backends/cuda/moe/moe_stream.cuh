// Shared pieces of the streaming per-slot MoE kernels of decode steps of 2-8 tokens (moe.cu,
// nvfp4_moe.cu): a grid of at most one wave of resident CTAs whose warps walk a list of work items
// (one item = a few weight rows of one slot), each warp keeping the loads of its next steps in
// flight while it computes the current one, so no warp drains between items.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backends/cuda/common/cuda_check.h"

namespace striker::cuda {

// One item of a gate/up launch: two output rows o0, o1 (o1 = o0 when rows is odd) of one slot.
// Items are numbered shared-expert slots first (their weights do not depend on the routing, so
// the warps that start on them load before griddepcontrol.wait), then routed slot by slot, row
// pairs minor, so neighbouring warps read neighbouring rows of one expert.
struct MoeGateUpItem {
  bool shared;
  int slot, t, o0, o1, rows;
};

__device__ __forceinline__ MoeGateUpItem moe_gate_up_item(int i, int T, int K, int inter, int shared_inter,
                                                          int shared_items) {
  MoeGateUpItem it;
  if (i < shared_items) {
    const int pairs = (shared_inter + 1) / 2;
    it.shared = true;
    it.t = i / pairs;
    it.slot = T * K + it.t;
    it.o0 = (i - it.t * pairs) * 2;
    it.rows = shared_inter;
  } else {
    const int pairs = (inter + 1) / 2, j = i - shared_items;
    it.shared = false;
    it.slot = j / pairs;
    it.t = it.slot / K;
    it.o0 = (j - it.slot * pairs) * 2;
    it.rows = inter;
  }
  it.o1 = min(it.o0 + 1, it.rows - 1);
  return it;
}

// TEMPORARY (A/B run): the fewest tokens that take the streaming kernels. STRIKER_AB_OFF=1: none
// (the per-slot kernels of before at every T); STRIKER_STREAM_T1=1: from one token on.
inline int moe_stream_min_tokens() {
  static const int min_tokens = [] {
    const char* off = std::getenv("STRIKER_AB_OFF");
    if (off != nullptr && off[0] == '1') return 1 << 30;
    const char* t1 = std::getenv("STRIKER_STREAM_T1");
    return t1 != nullptr && t1[0] == '1' ? 1 : 2;
  }();
  return min_tokens;
}

// CTAs of `warps` warps for `items` work items (one per warp and pass): all of them resident at once (one wave).
template <auto kKernel>
int moe_stream_ctas(int threads, int64_t items, int warps) {
  static const int resident = [&] {
    int device = 0, sms = 0, per_sm = 0;
    STRIKER_CUDA_CHECK(cudaGetDevice(&device));
    STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    STRIKER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, 0));
    return std::max(1, sms * std::max(per_sm, 1));
  }();
  return int(std::max<int64_t>(1, std::min<int64_t>((items + warps - 1) / warps, resident)));
}

}  // namespace striker::cuda
