// Test-only launcher of router_sigmoid_probe.cu: the router's branch-free sigmoids against the
// division they replace, on the device, for every float.
#pragma once
#include <cstdint>

namespace striker::cuda::testing {

// Counts the 32-bit patterns x (all 2^32, NaNs included) where router_sigmoids (router_math.cuh)
// and 1.0f / (1.0f + expf(-x)) differ in their bits (any NaN equals any NaN); the first such x in
// *first_x. Both on the device; counters are device pointers, zeroed by the call.
void router_sigmoid_probe(unsigned long long* mismatches, uint32_t* first_x);

}  // namespace striker::cuda::testing
