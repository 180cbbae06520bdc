// Device side of CudaMoe.ExpertItemsMatchReference: expert_item and all_slots_item (expert_items.cuh)
// written out for the host to compare with expert_items_ref, the slot masks unpacked with pop_slot.
#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/moe/expert_items.cuh"
#include "expert_items_probe.h"

namespace striker::cuda::testing {
namespace {

// One warp per item index; lane 0 writes the expert and the slots popped one by one back into masks,
// so pop_slot's order and coverage are checked too.
__global__ void expert_items_probe_kernel(const int32_t* ids, int slots, uint32_t* out) {
  const int j = int(blockIdx.x);
  const ExpertItem it = j <= slots ? expert_item(ids, slots, j) : all_slots_item(slots);
  if ((threadIdx.x & 31) != 0) return;
  uint32_t lo = it.lo, hi = it.hi, rlo = 0u, rhi = 0u;
  int prev = -1;
  bool ascending = true;
  while ((lo | hi) != 0u) {
    const int s = pop_slot(lo, hi);
    ascending &= s > prev;
    prev = s;
    if (s < 32) rlo |= 1u << s;
    else rhi |= 1u << (s - 32);
  }
  uint32_t* o = out + 3 * j;
  if (j <= slots) o[0] = ascending ? uint32_t(it.expert) : 0xDEADBEEFu;
  o[j <= slots ? 1 : 0] = rlo;
  o[j <= slots ? 2 : 1] = rhi;
}

}  // namespace

void expert_items_probe(const int32_t* ids, int slots, uint32_t* out) {
  expert_items_probe_kernel<<<unsigned(slots + 2), 32>>>(ids, slots, out);
  STRIKER_CUDA_CHECK_LAUNCH("expert_items_probe");
}

}  // namespace striker::cuda::testing
