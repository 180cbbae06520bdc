// Structured-output token masks on the GPU: each constrained sample's packed bitset
// (SampleRequest::allowed, one bit per token) goes up in a pinned slot and a kernel turns every
// cleared bit of its logits row into -inf, in place, before the edits kernel and the draw, so the
// sampling kernels see exactly what the CPU sampler's apply_allowed_mask leaves.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backends/backend.h"

namespace striker::cuda {

class TokenMaskBuffers {
 public:
  TokenMaskBuffers(int max_samples, int64_t vocab);
  ~TokenMaskBuffers();
  TokenMaskBuffers(const TokenMaskBuffers&) = delete;
  TokenMaskBuffers& operator=(const TokenMaskBuffers&) = delete;

  int64_t words() const { return words_; }
  // Copies the masks of the samples that have one into pinned slots, uploads them and launches
  // the masking kernel on `logits` ([rows, vocab]). Returns how many rows were masked.
  // Pinned slots are reused every step: the caller syncs the stream before the next call.
  int apply(const std::vector<SampleRequest>& samples, float* logits, cudaStream_t stream);

 private:
  void release();
  int max_samples_;
  int64_t vocab_, words_;
  int32_t* rows_host_ = nullptr;
  int32_t* rows_dev_ = nullptr;
  uint32_t* masks_host_ = nullptr;
  uint32_t* masks_dev_ = nullptr;
};

// The kernel alone (tests): rows[s] is the logits row of mask slot s.
void apply_token_masks(float* logits, int64_t vocab, const int32_t* rows, const uint32_t* masks, int slots,
                       cudaStream_t stream);

}  // namespace striker::cuda
