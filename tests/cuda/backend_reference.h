// The host reference for the CudaBackend tests (test_backend.cpp: BF16, test_backend_nvfp4.cpp:
// NVFP4): a small random Flint, its forward pass assembled from the per-kernel CPU references
// (FLINT.md §4 rounding points, double accumulation), and the checks that run the backend
// through prefill, decode and batched steps against it.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/backend/cuda_backend.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {

// Tiny-config shapes: 5 layers (2 dense, 3 MoE of 16 experts top-6), sliding window 17.
FlintConfig small_config();

// Host weights with owned storage, plus the float copies the reference reads.
struct HostModel {
  LoadedModel model;
  std::mt19937 rng{77};
  WeightView bf16_tensor(const std::string& name, std::vector<int64_t> shape, float std) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    auto buf = std::make_shared<std::vector<bf16>>(random_bf16(rng, size_t(n), std));
    model.storage.push_back(buf);
    return WeightView{name, DType::BF16, shape, reinterpret_cast<const std::byte*>(buf->data()), size_t(n) * 2, 1.f};
  }
  WeightView f32_tensor(const std::string& name, int64_t n, float mean, float std) {
    auto buf = std::make_shared<std::vector<float>>(random_f32(rng, size_t(n), mean, std));
    model.storage.push_back(buf);
    return WeightView{name, DType::F32, {n}, reinterpret_cast<const std::byte*>(buf->data()), size_t(n) * 4, 1.f};
  }
};

HostModel make_host_model(const FlintConfig& c);

// Reference forward over a whole sequence (contiguous cache, identity block table); returns
// float logits [N, V].
std::vector<float> reference_logits(const LoadedModel& m, const std::vector<int32_t>& tokens);

// Per row: max |Δ logprob| over the vocabulary and whether the argmax agrees.
struct RowDiff {
  double max_dlogprob;
  bool same_argmax;
};
RowDiff diff_row(const float* got, const float* ref, int64_t V);

// Runs `device_model` through the backend (prefill chunks, decode steps, batches, with and
// without graphs) and compares every logits row with reference_logits(ref_model).
// one_token_step_kernels >= 0: the captured graph of a one-token decode step must hold exactly that
// many kernels — the step's structure (which fusions a one-token step takes), not only its numbers.
// block_size: tokens per KV cache block (serve's --block-size; 16 and up on the GPU).
void expect_backend_matches_reference(const LoadedModel& device_model, const LoadedModel& ref_model,
                                      int one_token_step_kernels = -1, int block_size = 16);

// Steps of 64 and 16 tokens go through the grouped MoE kernels (device-side routing sort):
// 16 sequences prefill 4 tokens each in one step, then decode together twice (the second
// decode step replays the graph captured by the first when graphs are on). `device_model`
// runs on the GPU, `ref_model` (the same weights, BF16) feeds the host reference.
void expect_batched_steps_match_reference(const LoadedModel& device_model, const LoadedModel& ref_model,
                                          const char* label);

}  // namespace striker::cuda::testing
