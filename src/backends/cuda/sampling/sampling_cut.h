// The cut path's digit launches (sampling_cut.cu), called by sample_rows between the first kernel
// and the race kernels: the 4 top_k digits when paths.top_k_cut, the 4 top_p digits when
// paths.top_p_cut, each over (max_samples x plan.splits) CTAs; rows not on the cut path return at once.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/sampling/sampling.h"
#include "backends/sample_split.h"

namespace striker::cuda {

void launch_cut_digits(const float* logits, int32_t vocab, const SampleRowParams* params, const int32_t* counts,
                       const sample_split::SplitPlan& plan, const SampleScratch& scratch, int max_samples,
                       const SamplePaths& paths, cudaStream_t stream);

}  // namespace striker::cuda
