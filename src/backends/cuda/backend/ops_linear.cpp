// CudaBackend's dense ops, each choosing its kernel by weight format and step size: up to
// kGemvMaxTokens tokens the GEMV kernels stream the weights once (BF16 or NVFP4); above, cuBLASLt
// (NVFP4 weights dequantised to BF16 first, alpha = scale2; nvfp4_prefill.h).
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

void CudaBackend::linear(const bf16* x, int T, int in, const bf16* W, int out, bf16* y) {
  if (T <= kGemvMaxTokens) gemv_bf16(x, T, in, W, out, y, stream_);
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

void CudaBackend::linear(const bf16* x, int T, int in, const bf16* W, const Nvfp4Linear& q, int out, bf16* y) {
  if (!q.present()) return linear(x, T, in, W, out, y);
  if (T <= kGemvMaxTokens) nvfp4_gemv(x, T, in, q.matrix(), q.scale2, out, y, stream_);
  else nvfp4_gemm(ws_->lt, x, T, in, q.matrix(), q.scale2, out, y, out, ws_->nv_scratch, stream_);
}

void CudaBackend::linear_residual(const bf16* x, int T, int in, const bf16* W, const Nvfp4Linear& q, int out,
                                  bf16* h, const float* norm_w) {
  if (!q.present()) return linear_residual(x, T, in, W, out, h, norm_w);
  if (T <= kGemvMaxTokens) {
    nvfp4_gemv_residual(x, T, in, q.matrix(), q.scale2, out, h, stream_);
    if (norm_w != nullptr) rmsnorm(h, norm_w, ws_->x, T, out, model_.config.rms_norm_eps, stream_);
  } else {
    nvfp4_gemm(ws_->lt, x, T, in, q.matrix(), q.scale2, out, ws_->tmp, out, ws_->nv_scratch, stream_);
    add_tmp_residual(h, T, out, norm_w);
  }
}

// Dense layers: h = bf16(h + swiglu(x)).
void CudaBackend::swiglu_dense(const DeviceLayer& L, int T, const float* next_norm) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int H = int(c.hidden_size), Id = int(c.intermediate_size);
  swiglu_front(w.x, T, H, L.gate, L.nv_gate, L.up, L.nv_up, Id, w.act);
  linear_residual(w.act, T, Id, L.down, L.nv_down, H, w.h, next_norm);
}

// Decode steps fuse gate, up and SwiGLU into one GEMV launch when both weights share a format;
// otherwise two projections (into ws_->gate / ws_->up) and an elementwise SwiGLU.
void CudaBackend::swiglu_front(const bf16* x, int T, int in, const bf16* Wg, const Nvfp4Linear& qg, const bf16* Wu,
                               const Nvfp4Linear& qu, int inter, bf16* act) {
  Workspace& w = *ws_;
  if (T <= kGemvMaxTokens && Wg && Wu) {
    gemv_gate_up(x, T, in, Wg, Wu, inter, act, stream_);
  } else if (T <= kGemvMaxTokens && qg.present() && qu.present()) {
    nvfp4_gemv_gate_up(x, T, in, qg.matrix(), qg.scale2.s[0], qu.matrix(), qu.scale2.s[0], inter, act, stream_);
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
  embedding_gather(w.h, p.T, H, p.logit_rows, p.rows, w.logit_x, stream_);
  rmsnorm(w.logit_x, model_.final_norm, w.logit_x, p.rows, H, c.rms_norm_eps, stream_);
  const int64_t n = int64_t(p.rows) * V;
  if (model_.nv_lm_head.present()) {
    const Nvfp4Linear& q = model_.nv_lm_head;
    if (p.rows <= kGemvMaxTokens) {
      nvfp4_gemv_logits(w.logit_x, p.rows, H, q.matrix(), q.scale2, V, w.logits, stream_);
    } else {
      nvfp4_gemm(w.lt, w.logit_x, p.rows, H, q.matrix(), q.scale2, V, w.logits_bf16, V, w.nv_scratch, stream_);
      bf16_to_f32(w.logits_bf16, w.logits, n, stream_);
    }
  } else if (p.rows <= kGemvMaxTokens) {
    gemv_logits(w.logit_x, p.rows, H, model_.lm_head, V, w.logits, stream_);
  } else {
    w.lt.gemm_bf16(w.logit_x, p.rows, H, model_.lm_head, V, w.logits_bf16, stream_);
    bf16_to_f32(w.logits_bf16, w.logits, n, stream_);
  }
}

}  // namespace striker::cuda
