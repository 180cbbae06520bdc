#include "backends/cuda/sampling/sampling_masks.h"

#include <cmath>
#include <cstring>
#include <string>

#include "backends/cuda/common/cuda_check.h"

namespace striker::cuda {
namespace {

// Grid (slots, word blocks): one thread per 32-token word; an all-ones word (the common case in
// free text) costs one load.
__global__ void __launch_bounds__(256) mask_kernel(float* logits, int64_t vocab, int64_t words, const int32_t* rows,
                                                   const uint32_t* masks) {
  const int64_t w = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (w >= words) return;
  const uint32_t bits = masks[int64_t(blockIdx.x) * words + w];
  if (bits == 0xFFFFFFFFu) return;
  float* x = logits + int64_t(rows[blockIdx.x]) * vocab;
  const int64_t end = min(vocab, w * 32 + 32);
  for (int64_t i = w * 32; i < end; ++i)
    if (!((bits >> (i & 31)) & 1u)) x[i] = -INFINITY;
}

}  // namespace

void apply_token_masks(float* logits, int64_t vocab, const int32_t* rows, const uint32_t* masks, int slots,
                       cudaStream_t stream) {
  if (slots <= 0) return;
  const int64_t words = (vocab + 31) / 32;
  mask_kernel<<<dim3(unsigned(slots), unsigned((words + 255) / 256)), dim3(256), 0, stream>>>(logits, vocab, words,
                                                                                             rows, masks);
  STRIKER_CUDA_CHECK_LAUNCH("apply_token_masks");
}

TokenMaskBuffers::TokenMaskBuffers(int max_samples, int64_t vocab)
    : max_samples_(max_samples), vocab_(vocab), words_((vocab + 31) / 32) {
  const size_t mask_bytes = size_t(max_samples) * size_t(words_) * 4;
  auto check = [&](cudaError_t err, const char* what) {
    if (err == cudaSuccess) return;
    release();
    throw Error(std::string("device sampling: cannot allocate ") + what + " for token masks (" +
                std::to_string(mask_bytes >> 20) + " MiB): " + cudaGetErrorString(err));
  };
  check(cudaMallocHost(reinterpret_cast<void**>(&rows_host_), size_t(max_samples) * 4), "pinned rows");
  check(cudaMalloc(reinterpret_cast<void**>(&rows_dev_), size_t(max_samples) * 4), "device rows");
  check(cudaMallocHost(reinterpret_cast<void**>(&masks_host_), mask_bytes), "pinned masks");
  check(cudaMalloc(reinterpret_cast<void**>(&masks_dev_), mask_bytes), "device masks");
}

TokenMaskBuffers::~TokenMaskBuffers() { release(); }

void TokenMaskBuffers::release() {
  if (rows_host_) cudaFreeHost(rows_host_);
  if (rows_dev_) cudaFree(rows_dev_);
  if (masks_host_) cudaFreeHost(masks_host_);
  if (masks_dev_) cudaFree(masks_dev_);
  rows_host_ = rows_dev_ = nullptr;
  masks_host_ = masks_dev_ = nullptr;
}

int TokenMaskBuffers::apply(const std::vector<SampleRequest>& samples, float* logits, cudaStream_t stream) {
  int slots = 0;
  for (const SampleRequest& r : samples) {
    if (!r.allowed) continue;
    if (slots >= max_samples_)
      throw Error("device sampling: more than " + std::to_string(max_samples_) + " masked samples in one step");
    rows_host_[slots] = r.row;
    std::memcpy(masks_host_ + int64_t(slots) * words_, r.allowed, size_t(words_) * 4);
    ++slots;
  }
  if (slots == 0) return 0;
  STRIKER_CUDA_CHECK(cudaMemcpyAsync(rows_dev_, rows_host_, size_t(slots) * 4, cudaMemcpyHostToDevice, stream));
  STRIKER_CUDA_CHECK(cudaMemcpyAsync(masks_dev_, masks_host_, size_t(slots) * size_t(words_) * 4,
                                     cudaMemcpyHostToDevice, stream));
  apply_token_masks(logits, vocab_, rows_dev_, masks_dev_, slots, stream);
  return slots;
}

}  // namespace striker::cuda
