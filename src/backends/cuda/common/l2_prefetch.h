// Warming L2 with weights that a later kernel of the step reads. A batch-1 decode step leaves HBM
// idle for long stretches (q/k-norm, attention over a short window, the norms, the router: ~20 µs
// of every layer move almost nothing), then streams a projection's weights at full rate. Weights
// do not depend on the step, so the next projection's bytes can be requested during those
// stretches: a prefetch kernel on a side branch of the step's graph issues bulk L2 prefetches
// (cp.async.bulk.prefetch.L2, one instruction per 16 KiB) and the projection then reads L2.
// Prefetching changes no result, only where the bytes come from.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace striker::cuda {

struct L2Range {
  const void* ptr = nullptr;  // 16-byte aligned (every weight allocation is)
  int64_t bytes = 0;
};

constexpr int kL2PrefetchMaxRanges = 8;

// Up to kL2PrefetchMaxRanges byte ranges, passed to the kernel by value.
struct L2Ranges {
  L2Range r[kL2PrefetchMaxRanges];
  int n = 0;
  // Adds [ptr, ptr + bytes) unless ptr is null; throws striker::Error when full.
  void add(const void* ptr, int64_t bytes);
  int64_t total() const;
};

// Issues L2 prefetches of every range (whole 16-byte units; a range's last < 16 bytes are left
// out). Returns at once; the kernel only issues requests and exits.
void l2_prefetch(const L2Ranges& ranges, cudaStream_t stream);

}  // namespace striker::cuda
