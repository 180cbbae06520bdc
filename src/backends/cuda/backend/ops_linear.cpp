// CudaBackend's dense ops, each choosing its kernel by weight format and step size: up to
// kGemvMaxTokens tokens the GEMV kernels stream the weights once (BF16; NVFP4 up to
// kNvfp4SkinnyMaxTokens); above, cuBLASLt (NVFP4 weights dequantised to BF16 first, alpha = scale2;
// nvfp4_prefill.h).
#include "backends/cuda/backend/cuda_backend.h"

#include "backends/cuda/backend/cuda_backend_state.h"
#include "backends/cuda/elementwise/elementwise.h"
#include "backends/cuda/elementwise/embedding.h"
#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_prefill.h"

namespace striker::cuda {
namespace {

// NVFP4 dense projections of up to this many tokens run on the skinny MMA kernels (nvfp4_skinny.cuh:
// token groups of 8 in grid.y, each group decoding the codes again, from L2 where the matrix fits);
// above, dequantise into the scratch + cuBLASLt. Measured (session 32, H100, 1K context): the skinny
// kernels win at every size up to 64 sequences (9: 10.13 -> 7.46 ms, 16: 12.24 -> 9.50, 32: 15.64 ->
// 13.60, 64: 20.06 -> 19.70), by the dequantised bf16 scratch they never write; docs/performance.md.
constexpr int kNvfp4SkinnyMaxTokens = 64;

}  // namespace

// One token into a GEMV (`gemv`): the GEMV forms x = rmsnorm(h) in its CTAs (`storage` describes
// the norm). Otherwise the rmsnorm kernel writes ws_->x first and x points there.
const InputNorm* CudaBackend::input_norm_for(const bf16*& x, int T, int in, const float* in_norm, bool gemv,
                                             InputNorm& storage) {
  if (in_norm == nullptr) return nullptr;
  if (gemv && T == 1) {
    storage = InputNorm{in_norm, model_.config.rms_norm_eps};
    return &storage;
  }
  rmsnorm(x, in_norm, ws_->x, T, in, model_.config.rms_norm_eps, stream_);
  x = ws_->x;
  return nullptr;
}

void CudaBackend::linear(const bf16* x, int T, int in, const bf16* W, int out, bf16* y, const float* in_norm) {
  InputNorm norm;
  const InputNorm* fused = input_norm_for(x, T, in, in_norm, true, norm);
  if (T <= kGemvMaxTokens) gemv_bf16(x, T, in, W, out, y, stream_, fused);
  else ws_->lt.gemm_bf16(x, T, in, W, out, y, stream_);
}

void CudaBackend::linear_residual(const bf16* x, int T, int in, const bf16* W, int out, bf16* h,
                                  const float* norm_w) {
  if (T <= kGemvMaxTokens) {
    gemv_residual(x, T, in, W, out, h, stream_);
    if (norm_w != nullptr) rmsnorm(h, norm_w, ws_->x, T, out, model_.config.rms_norm_eps, stream_);
  } else {
    ws_->lt.gemm_bf16(x, T, in, W, out, ws_->tmp, stream_);
    add_tmp_residual(h, T, out, norm_w);
  }
}

void CudaBackend::add_tmp_residual(bf16* h, int T, int out, const float* norm_w) {
  if (norm_w != nullptr) add_rmsnorm(h, ws_->tmp, norm_w, ws_->x, T, out, model_.config.rms_norm_eps, stream_);
  else residual_add(h, ws_->tmp, int64_t(T) * out, stream_);
}

void CudaBackend::linear(const bf16* x, int T, int in, const bf16* W, const Nvfp4Linear& q, int out, bf16* y,
                         const float* in_norm) {
  if (!q.present()) return linear(x, T, in, W, out, y, in_norm);
  InputNorm norm;
  const InputNorm* fused = input_norm_for(x, T, in, in_norm, true, norm);
  if (T <= kNvfp4SkinnyMaxTokens) nvfp4_gemv(x, T, in, q.matrix(), q.scale2, out, y, stream_, fused);
  else nvfp4_gemm(ws_->lt, x, T, in, q.matrix(), q.scale2, out, y, out, ws_->nv_scratch, stream_);
}

void CudaBackend::linear_residual(const bf16* x, int T, int in, const bf16* W, const Nvfp4Linear& q, int out,
                                  bf16* h, const float* norm_w) {
  if (!q.present()) return linear_residual(x, T, in, W, out, h, norm_w);
  if (T <= kNvfp4SkinnyMaxTokens) {
    nvfp4_gemv_residual(x, T, in, q.matrix(), q.scale2, out, h, stream_);
    if (norm_w != nullptr) rmsnorm(h, norm_w, ws_->x, T, out, model_.config.rms_norm_eps, stream_);
  } else {
    nvfp4_gemm(ws_->lt, x, T, in, q.matrix(), q.scale2, out, ws_->tmp, out, ws_->nv_scratch, stream_);
    add_tmp_residual(h, T, out, norm_w);
  }
}

// Dense layers: h = bf16(h + swiglu(x)), x = ws_->x or rmsnorm(h, in_norm).
void CudaBackend::swiglu_dense(const DeviceLayer& L, int T, const float* in_norm, const float* next_norm) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int H = int(c.hidden_size), Id = int(c.intermediate_size);
  swiglu_front(in_norm != nullptr ? w.h : w.x, T, H, L.gate, L.nv_gate, L.up, L.nv_up, Id, w.act, in_norm);
  linear_residual(w.act, T, Id, L.down, L.nv_down, H, w.h, next_norm);
}

// Decode steps fuse gate, up and SwiGLU into one GEMV launch when both weights share a format;
// otherwise two projections (into ws_->gate / ws_->up) and an elementwise SwiGLU.
void CudaBackend::swiglu_front(const bf16* x, int T, int in, const bf16* Wg, const Nvfp4Linear& qg, const bf16* Wu,
                               const Nvfp4Linear& qu, int inter, bf16* act, const float* in_norm) {
  Workspace& w = *ws_;
  const bool bf16_pair = T <= kGemvMaxTokens && Wg && Wu;
  const bool nvfp4_pair = T <= kNvfp4SkinnyMaxTokens && qg.present() && qu.present();
  InputNorm norm;  // one launch for norm, gate, up and SwiGLU where the pair shares a format
  const InputNorm* fused = input_norm_for(x, T, in, in_norm, bf16_pair || nvfp4_pair, norm);
  if (bf16_pair) {
    gemv_gate_up(x, T, in, Wg, Wu, inter, act, stream_, fused);
  } else if (nvfp4_pair) {
    nvfp4_gemv_gate_up(x, T, in, qg.matrix(), qg.scale2.s[0], qu.matrix(), qu.scale2.s[0], inter, act, stream_,
                       fused);
  } else {  // prefill, or gate and up in different formats
    linear(x, T, in, Wg, qg, inter, w.gate);
    linear(x, T, in, Wu, qu, inter, w.up);
    swiglu_act(w.gate, w.up, act, int64_t(T) * inter, stream_);
  }
}

// logits = float(bf16(mm(rmsnorm(h), lm_head))) for the plan's requested rows only (the LM head
// is the largest matrix of the model).
void CudaBackend::lm_head_logits(const StepPlan& p) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int H = int(c.hidden_size), V = int(c.vocab_size);
  // One token, one row (a decode step of one sequence), BF16 weights: the row is h itself, normalised
  // inside the LM head's GEMV. Otherwise the requested rows are gathered and normalised in place
  // first (the NVFP4 LM head too: its 9,472 CTAs at 3 per SM run 24 waves, each paying the norm's
  // barriers; measured 99.0 µs with the norm inside against 79.2 for norm + GEMV).
  const InputNorm one_row{model_.final_norm, c.rms_norm_eps};
  const bool in_gemv = p.T == 1 && p.rows == 1 && !model_.nv_lm_head.present();
  const InputNorm* fused = in_gemv ? &one_row : nullptr;
  const bf16* xs = in_gemv ? w.h : w.logit_x;
  if (!in_gemv) {
    embedding_gather(w.h, p.T, H, p.logit_rows, p.rows, w.logit_x, stream_);
    rmsnorm(w.logit_x, model_.final_norm, w.logit_x, p.rows, H, c.rms_norm_eps, stream_);
  }
  const int64_t n = int64_t(p.rows) * V;
  if (model_.nv_lm_head.present()) {
    const Nvfp4Linear& q = model_.nv_lm_head;
    if (p.rows <= kNvfp4SkinnyMaxTokens) {
      nvfp4_gemv_logits(w.logit_x, p.rows, H, q.matrix(), q.scale2, V, w.logits, stream_);
    } else {
      nvfp4_gemm(w.lt, w.logit_x, p.rows, H, q.matrix(), q.scale2, V, w.logits_bf16, V, w.nv_scratch, stream_);
      bf16_to_f32(w.logits_bf16, w.logits, n, stream_);
    }
  } else if (p.rows <= kGemvMaxTokens) {
    gemv_logits(xs, p.rows, H, model_.lm_head, V, w.logits, stream_, fused);
  } else {
    w.lt.gemm_bf16(w.logit_x, p.rows, H, model_.lm_head, V, w.logits_bf16, stream_);
    bf16_to_f32(w.logits_bf16, w.logits, n, stream_);
  }
}

}  // namespace striker::cuda
