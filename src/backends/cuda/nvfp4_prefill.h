// NVFP4 projections of prefill chunks (more than 8 tokens): the weight is dequantised into a
// bf16 scratch buffer (exact, nvfp4_linear.h) and multiplied by cuBLASLt with alpha = scale2,
// so scale2 still multiplies the fp32 accumulator before the bf16 rounding (FLINT.md §4).
// Kept apart from the BF16 prefill path (cuda_backend.cpp) on purpose.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/device_model.h"
#include "backends/cuda/gemm_lt.h"
#include "backends/cuda/nvfp4_linear.h"

namespace striker::cuda {

// A device buffer for dequantised weights; matrices larger than it go in row chunks.
struct Nvfp4Scratch {
  bf16* data = nullptr;
  int64_t elems = 0;
};

// Scratch size the backend allocates for `model` (0 when no linear weight is NVFP4): the
// largest NVFP4 matrix other than the LM head, at least 8M values (the LM head goes in chunks).
int64_t nvfp4_scratch_elems(const DeviceModel& model);

// y[t·ld_y + o] = bf16(scale2(o)·Σ_i x[t,i]·W[o,i]) for o < out_dim: rows dequantised chunk by
// chunk (chunks also end where scale2 changes), one GEMM per chunk.
void nvfp4_gemm(LtGemm& lt, const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim, bf16* y,
                int ld_y, Nvfp4Scratch scratch, cudaStream_t stream);

// Buffers of the prefill MoE block (the backend's workspace).
struct MoePrefillBuffers {
  const bf16* x = nullptr;         // [T, H] normalised input
  bf16* h = nullptr;               // [T, H] residual, updated
  const int32_t* topk_ids = nullptr;  // device [T, K]
  const float* topk_w = nullptr;      // device [T, K]
  bf16 *xs_sorted = nullptr, *g_sorted = nullptr, *u_sorted = nullptr, *a_sorted = nullptr, *y_sorted = nullptr;
  int32_t* d_sort = nullptr;       // device [2·T·K]
  int32_t* ids_host = nullptr;     // pinned [T·K]
  int32_t* sort_host = nullptr;    // pinned [2·T·K]
  bf16 *sh_gate = nullptr, *sh_up = nullptr, *sh_act = nullptr;  // [T, Is]
  bf16* sh_out = nullptr;          // [T, H]
};

// h = bf16(h + y) for a chunk whose routed experts are NVFP4 (shared expert NVFP4 or BF16):
// routing comes to the host (one sync), rows are sorted by expert, and each selected expert's
// gate, up and down run as GEMMs with alpha = that expert's scale2. When at least a quarter of
// the experts are selected and `stack_scratch` holds E·I·H values, each of gate/up/down is
// dequantised for all experts in one launch (instead of one launch per selected expert).
void nvfp4_moe_prefill(LtGemm& lt, const DeviceLayer& L, const FlintConfig& c, int T, const MoePrefillBuffers& b,
                       Nvfp4Scratch scratch, Nvfp4Scratch stack_scratch, cudaStream_t stream);

// Size of that stack scratch for `model` (0 when no routed experts are NVFP4).
int64_t nvfp4_stack_scratch_elems(const DeviceModel& model);

}  // namespace striker::cuda
