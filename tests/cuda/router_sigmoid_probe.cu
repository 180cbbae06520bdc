// Device side of CudaRouter.SigmoidsHaveTheDivisionsBitsOnEveryFloat: router_sigmoids (the IEEE
// division's fast path written out, router_math.cuh) against the division itself, for all 2^32
// inputs, so "the same bits" is checked, not argued.
#include <cstring>

#include "backends/cuda/moe/router_math.cuh"
#include "router_sigmoid_probe.h"

namespace striker::cuda::testing {
namespace {

constexpr int kPerThread = 8;  // one router_sigmoids<8> call per thread, as a selecting lane makes

__global__ void router_sigmoid_probe_kernel(unsigned long long* mismatches, uint32_t* first_x) {
  const uint64_t base = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kPerThread;
  float x[kPerThread], s[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) x[i] = __uint_as_float(uint32_t(base + i));
  router_sigmoids<kPerThread>(x, s);
  unsigned bad = 0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const float ref = 1.0f / (1.0f + expf(-x[i]));
    const bool same = __float_as_uint(ref) == __float_as_uint(s[i]) || (ref != ref && s[i] != s[i]);
    if (!same) {
      ++bad;
      atomicMin(first_x, uint32_t(base + i));
    }
  }
  if (bad != 0) atomicAdd(mismatches, (unsigned long long)bad);
}

}  // namespace

void router_sigmoid_probe(unsigned long long* mismatches, uint32_t* first_x) {
  cudaMemset(mismatches, 0, sizeof(unsigned long long));
  cudaMemset(first_x, 0xFF, sizeof(uint32_t));
  constexpr unsigned kThreads = 256;
  const unsigned blocks = unsigned((uint64_t(1) << 32) / (uint64_t(kThreads) * kPerThread));
  router_sigmoid_probe_kernel<<<blocks, kThreads>>>(mismatches, first_x);
}

}  // namespace striker::cuda::testing
