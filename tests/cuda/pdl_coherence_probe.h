// A probe of what a kernel reads after griddepcontrol.wait when the buffer was rewritten by the
// kernel in front and read, through the same load path, by earlier kernels that ran on the same SMs
// (the pattern that made the tenth session's first norm-inside QKV read stale h through
// ld.global.nc). bench_cuda_kernels pdl-coherence reports the stale reads of each load path.
#pragma once
#include <cstdint>

namespace striker::cuda::testing {

enum class ProbeLoad { NonCoherent, L2, Plain };  // ld.global.nc (__ldg), ld.global.cg (load_from_l2), a plain load

struct CoherenceProbeResult {
  int64_t reads = 0;  // 16-byte reads checked
  int64_t stale = 0;  // reads that did not return the latest writer's value
};

// `layers` times: readers (every SM) -> `spacers` kernels reading another buffer -> one writer of the
// next value -> the next readers. All launched with PDL, captured once in a graph and replayed
// `replays` times. Needs a GPU.
CoherenceProbeResult run_pdl_coherence_probe(ProbeLoad load, int layers, int spacers, int replays);

}  // namespace striker::cuda::testing
