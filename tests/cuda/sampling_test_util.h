// Test helper of the GPU sampler's tests (test_sampling.cpp, test_logprobs.cpp).
#pragma once
#include <algorithm>
#include <vector>

#include "backends/cuda/sampling/sampling.h"

namespace striker::cuda::testing {

// Packed rows and edits into `sb`'s pinned host buffers with their counts, as forward_sampled
// stages them (SamplingBuffers::upload sends them).
inline void stage_samples(SamplingBuffers& sb, const std::vector<SampleRowParams>& params,
                          const std::vector<LogitEdit>& edits) {
  std::copy(params.begin(), params.end(), sb.params_host());
  std::copy(edits.begin(), edits.end(), sb.edits_host());
  sb.counts_host()[0] = int32_t(params.size());
  sb.counts_host()[1] = int32_t(edits.size());
}

}  // namespace striker::cuda::testing
