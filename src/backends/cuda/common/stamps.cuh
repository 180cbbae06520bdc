// Per-CTA time stamps of a kernel's phases, taken inside the replayed decode graph: a profiling build
// only (cmake -DSTRIKER_STAMPS=ON; every other build compiles the macros below to nothing).
//
// Why: the CUPTI timeline gives whole kernels, and ncu replays one kernel alone, which weighs the work
// that overlaps its predecessor in the graph as if it were on the chain (docs/performance.md, session
// 46). Thread 0 of each CTA records %globaltimer (one clock for all SMs: the boundaries between
// kernels) and %clock64 (this SM's cycles: the phases inside a CTA) at its entry, past the PDL wait,
// at up to five of the kernel's own phase points and at its exit. scripts/stamps_report.py reads the
// file and prints, per kernel and predecessor, the boundary, the span after the wait and the phases.
//
// Usage inside a kernel: STRIKER_STAMPS_CTA(kind) first (its destructor stamps the exit, also on an
// early return), then STRIKER_STAMP(1) right past pdl_wait() and STRIKER_STAMP(2..6) at the kernel's
// phase points — also inside device functions the kernel calls (the record's address is in shared
// memory). A stamp follows the instructions before it in issue order only: put it where the phase's
// result has been consumed (past a barrier, a reduction or a store), not right after a load.
//
// STRIKER_STAMPS=path (environment) turns the recording on in a stamps build; the records go to a ring
// of STRIKER_STAMPS_CAP records (default 2^21) written to `path` when the backend is destroyed.
#pragma once

#ifdef STRIKER_STAMPS
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace striker::cuda::stamps {

// The stamped kernels (scripts/stamps_report.py names them by these numbers).
enum Kind : unsigned {
  kNvfp4Gemv = 1,
  kNvfp4GateUp = 2,
  kBf16Gemv = 3,
  kBf16GateUp = 4,
  kAttentionCluster = 5,
  kAttentionSplit = 6,
  kAttentionCombine = 7,
  kRouterSpread = 8,
  kNvfp4MoeGateUp = 9,
  kNvfp4MoeDown = 10,
  kMoeGateUp = 11,
  kMoeDown = 12,
};

constexpr int kPoints = 8;                // 0 entry, 1 past the PDL wait, 2..6 the kernel's phases, 7 exit
constexpr int kWords = 2 + 2 * kPoints;  // header, sequence, globaltimer[8], clock64[8]

struct Buffer {
  unsigned long long* rec = nullptr;  // [cap][kWords], a ring
  unsigned int* count = nullptr;
  unsigned int cap = 0;
};

// One copy per translation unit (no relocatable device code): each TU registers a setter below, and
// stamps_begin() (stamps.h) points every copy at the one buffer.
static __device__ Buffer g_buffer;
static __shared__ unsigned long long* s_record;  // thread 0's record of this CTA (null: not recording)

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
__device__ __forceinline__ unsigned long long sm_cycles() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
  return t;
}

__device__ __forceinline__ void stamp(int point) {
  if (threadIdx.x != 0 || s_record == nullptr) return;
  s_record[2 + point] = global_ns();
  s_record[2 + kPoints + point] = sm_cycles();
}

struct CtaScope {
  __device__ explicit CtaScope(unsigned kind) {
    if (threadIdx.x != 0) return;
    const unsigned long long g = global_ns(), c = sm_cycles();
    s_record = nullptr;
    if (g_buffer.rec == nullptr) return;
    const unsigned i = atomicAdd(g_buffer.count, 1u);
    unsigned long long* r = g_buffer.rec + (unsigned long long)(i % g_buffer.cap) * kWords;
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    r[0] = (unsigned long long)kind | (unsigned long long)(smid & 0xFFFu) << 8 |
           (unsigned long long)(blockIdx.x & 0xFFFFFu) << 20 | (unsigned long long)(blockIdx.y & 0xFFFu) << 40 |
           (unsigned long long)(blockIdx.z & 0xFFFu) << 52;
    r[1] = i;
#pragma unroll
    for (int p = 1; p < kPoints; ++p) r[2 + p] = r[2 + kPoints + p] = 0;  // 0: point not reached
    r[2] = g;
    r[2 + kPoints] = c;
    s_record = r;
  }
  __device__ ~CtaScope() { stamp(kPoints - 1); }
};

using Setter = void (*)(const Buffer&);
inline std::vector<Setter>& setters() {
  static std::vector<Setter> all;
  return all;
}
namespace {
void set_this_unit(const Buffer& b) { cudaMemcpyToSymbol(g_buffer, &b, sizeof b); }
const bool g_registered = (setters().push_back(&set_this_unit), true);
}  // namespace

}  // namespace striker::cuda::stamps

#define STRIKER_STAMPS_CTA(kind) ::striker::cuda::stamps::CtaScope striker_stamps_cta_(::striker::cuda::stamps::kind)
#define STRIKER_STAMP(point) ::striker::cuda::stamps::stamp(point)
#else
#define STRIKER_STAMPS_CTA(kind) \
  do {                           \
  } while (0)
#define STRIKER_STAMP(point) \
  do {                       \
  } while (0)
#endif
