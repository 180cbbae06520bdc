// Test-only launcher of expert_items_probe.cu: expert_item (expert_items.cuh) for every item index of
// a step's routing, on the device.
#pragma once
#include <cstdint>

namespace striker::cuda::testing {

// For j in [0, slots], warp j writes item j of ids[0 .. slots) (device pointers) as out[3j..3j+2] =
// {expert, lo, hi}; and out[3(slots + 1) ..] = all_slots_item(slots)'s {lo, hi}. out holds 3·slots + 5
// words.
void expert_items_probe(const int32_t* ids, int slots, uint32_t* out);

}  // namespace striker::cuda::testing
