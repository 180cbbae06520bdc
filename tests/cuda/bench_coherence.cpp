// bench_cuda_kernels pdl-coherence: how many reads after griddepcontrol.wait return a value older
// than the kernel in front wrote, per load path (pdl_coherence_probe.h). ld.global.cg (L2) must read
// none stale: that is the path the kernels use for activations a PDL-overlapped kernel writes; a
// stale count for ld.global.nc or a plain load says that path is unsafe for such activations.
#include <cstdio>

#include "bench_kernels.h"
#include "bench_util.h"
#include "pdl_coherence_probe.h"

namespace striker::cuda::testing {

void bench_pdl_coherence() {
  struct Case {
    const char* name;
    ProbeLoad load;
  };
  const Case cases[] = {{"ld.global.cg (L2)", ProbeLoad::L2},
                        {"ld.global.nc (__ldg)", ProbeLoad::NonCoherent},
                        {"plain ld.global", ProbeLoad::Plain}};
  std::printf("pdl-coherence: 48 layers of [readers on every SM -> spacers -> writer -> readers], 50 graph replays\n");
  for (const int spacers : {0, 2, 6}) {
    for (const Case& c : cases) {
      const CoherenceProbeResult r = run_pdl_coherence_probe(c.load, 48, spacers, 50);
      std::printf("  %-22s spacers %d: %lld of %lld 16-byte reads stale\n", c.name, spacers, (long long)r.stale,
                  (long long)r.reads);
      if (c.load == ProbeLoad::L2 && r.stale != 0) count_kernel_check_failure();  // L2 reads must never be stale
    }
  }
}

}  // namespace striker::cuda::testing
