// See pdl_coherence_probe.h. Test-only kernels (built into bench_cuda_kernels, never the server).
#include "pdl_coherence_probe.h"

#include <cuda_runtime.h>

#include <vector>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/launch.cuh"

namespace striker::cuda::testing {
namespace {

constexpr int kThreads = 256;
constexpr int kRowBytes = kThreads * 16;  // 4 KiB: one h row of Flint

template <ProbeLoad L>
__device__ __forceinline__ uint4 probe_load(const uint4* p) {
  if constexpr (L == ProbeLoad::NonCoherent) return __ldg(p);
  else if constexpr (L == ProbeLoad::L2) return load_from_l2(p);
  else return *p;  // a weak ld.global (L1-cacheable), as plain C++ reads of activations compile to
}

// Every CTA reads the whole row after the wait and counts the 16-byte pieces that are not `expect`
// in all four words.
template <ProbeLoad L>
__global__ void __launch_bounds__(kThreads) probe_reader(const uint4* row, uint32_t expect,
                                                         unsigned long long* counts) {
  pdl_launch_dependents();
  pdl_wait();
  const uint4 v = probe_load<L>(row + threadIdx.x);
  const bool stale = v.x != expect || v.y != expect || v.z != expect || v.w != expect;
  const unsigned mask = __ballot_sync(0xffffffffu, stale);
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&counts[0], 32ull);
    if (mask) atomicAdd(&counts[1], static_cast<unsigned long long>(__popc(mask)));
  }
}

// Reads another buffer (what the kernels between a reader and the writer do), keeps the result alive.
__global__ void __launch_bounds__(kThreads) probe_spacer(const uint4* other, int n, uint4* sink) {
  pdl_launch_dependents();
  pdl_wait();
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x)) {
    const uint4 v = __ldg(other + i);
    acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
  }
  if (acc.x == 0x12345678u && acc.y == 0x9abcdef0u) sink[0] = acc;  // never, in practice
}

__global__ void __launch_bounds__(kThreads) probe_writer(uint4* row, uint32_t value) {
  pdl_launch_dependents();
  pdl_wait();
  row[threadIdx.x] = make_uint4(value, value, value, value);
}

template <ProbeLoad L>
void launch_reader(int ctas, const uint4* row, uint32_t expect, unsigned long long* counts, cudaStream_t s) {
  launch_pdl(probe_reader<L>, dim3(unsigned(ctas)), dim3(kThreads), 0, s, row, expect, counts);
}

}  // namespace

CoherenceProbeResult run_pdl_coherence_probe(ProbeLoad load, int layers, int spacers, int replays) {
  int dev = 0, sms = 0;
  STRIKER_CUDA_CHECK(cudaGetDevice(&dev));
  STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int ctas = 4 * sms;  // readers on every SM, several per SM
  const int other_n = 1 << 20;  // 16 MiB of other data per spacer
  uint4 *row = nullptr, *other = nullptr, *sink = nullptr;
  unsigned long long* counts = nullptr;
  STRIKER_CUDA_CHECK(cudaMalloc(&row, kRowBytes));
  STRIKER_CUDA_CHECK(cudaMalloc(&other, size_t(other_n) * 16));
  STRIKER_CUDA_CHECK(cudaMalloc(&sink, 16));
  STRIKER_CUDA_CHECK(cudaMalloc(&counts, 2 * sizeof(unsigned long long)));
  STRIKER_CUDA_CHECK(cudaMemset(other, 0x5A, size_t(other_n) * 16));
  STRIKER_CUDA_CHECK(cudaMemset(counts, 0, 2 * sizeof(unsigned long long)));
  cudaStream_t s;
  STRIKER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto reader = [&](uint32_t expect) {
    switch (load) {
      case ProbeLoad::NonCoherent: launch_reader<ProbeLoad::NonCoherent>(ctas, row, expect, counts, s); break;
      case ProbeLoad::L2: launch_reader<ProbeLoad::L2>(ctas, row, expect, counts, s); break;
      case ProbeLoad::Plain: launch_reader<ProbeLoad::Plain>(ctas, row, expect, counts, s); break;
    }
  };
  // Layer k's value is k + 1 (0 is what the row holds before the first writer of a replay).
  cudaGraph_t graph = nullptr;
  STRIKER_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  launch_pdl(probe_writer, dim3(1), dim3(kThreads), 0, s, row, 1u);
  for (int k = 1; k <= layers; ++k) {
    reader(uint32_t(k));
    for (int j = 0; j < spacers; ++j)
      launch_pdl(probe_spacer, dim3(unsigned(2 * sms)), dim3(kThreads), 0, s, static_cast<const uint4*>(other), other_n,
                 sink);
    launch_pdl(probe_writer, dim3(1), dim3(kThreads), 0, s, row, uint32_t(k + 1));
    reader(uint32_t(k + 1));
  }
  STRIKER_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  STRIKER_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < replays; ++r) STRIKER_CUDA_CHECK(cudaGraphLaunch(exec, s));
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(s));
  unsigned long long host[2] = {0, 0};
  STRIKER_CUDA_CHECK(cudaMemcpy(host, counts, sizeof(host), cudaMemcpyDeviceToHost));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cudaFree(row), cudaFree(other), cudaFree(sink), cudaFree(counts);
  return CoherenceProbeResult{int64_t(host[0]), int64_t(host[1])};
}

}  // namespace striker::cuda::testing
