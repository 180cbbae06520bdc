// Prefill GEMM through cuBLASLt: out[t,o] = bf16(Σ_i x[t,i]·W[o,i]) with fp32 accumulation
// (FLINT.md §4 mm). W is [out, in] row-major as in the checkpoint; no transposed copy is kept.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <tuple>

#include "backends/cuda/linear/lru_map.h"
#include "core/bf16.h"

namespace striker::cuda {

class CublasLtLibrary;

class LtGemm {
 public:
  // Opens cuBLASLt (cublaslt_library.h), allocates its handle and a workspace on the current device.
  LtGemm();
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Throws striker::Error when cuBLASLt has no algorithm for the shape or the call fails.
  void gemm_bf16(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* out, cudaStream_t stream);
  // out[t·ld_out + o] = bf16(alpha · Σ_i x[t,i]·W[o,i]): alpha scales the fp32 accumulator
  // (NVFP4's scale2, FLINT.md §4), and the output may be a column block of a wider matrix
  // (ld_out >= out_dim). Pointers need only 16-byte alignment.
  void gemm_bf16_scaled(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* out, int ld_out, float alpha,
                        cudaStream_t stream);
  // out[t·out_dim + o] = Σ_i x[t,i]·W[o,i] left in fp32 (no bf16 rounding): the batched MoE
  // router's logits (FLINT.md §4: products of bf16 values are exact in fp32, only the summation
  // order is the library's). Pointers need only 16-byte alignment.
  void gemm_bf16_f32out(const bf16* x, int T, int in, const bf16* W, int out_dim, float* out, cudaStream_t stream);

 private:
  struct Plan;
  std::unique_ptr<Plan> make_plan(int T, int in, int out_dim, int ld_out, bool align16, bool f32_out = false);
  std::unique_ptr<CublasLtLibrary> lt_;  // first member: outlives the plans and the handle
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  // Descriptors and the chosen algorithm per exact shape (T, in, out[, ld_out]); at most
  // kPlansPerKind of each kind are kept (a server meets every chunk length up to its token budget).
  static constexpr size_t kPlansPerKind = 512;
  LruMap<std::tuple<int, int, int>, std::unique_ptr<Plan>> plans_;
  LruMap<std::tuple<int, int, int, int>, std::unique_ptr<Plan>> scaled_plans_;
  LruMap<std::tuple<int, int, int>, std::unique_ptr<Plan>> f32_plans_;
};

}  // namespace striker::cuda
