// L2 warming for captured decode steps (common/l2_prefetch.h says why). Two forks per layer, each
// placed where the step's chain is about to go latency-bound:
//   after the QKV projection (q/k-norm, RoPE and attention follow): the o_proj weights;
//   after o_proj (the norm and the router follow): the shared expert's weights, and the next
//   layer's QKV weights.
// The routed experts are not warmed: their ids exist only when the router has finished.
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/common/cuda_check.h"

namespace striker::cuda {

namespace {
void add_linear(L2Ranges& r, const bf16* w, const Nvfp4Linear& q, int64_t rows, int64_t in) {
  if (q.present()) {
    r.add(q.codes, rows * in / 2);
    r.add(q.scales, rows * in / 16);
  } else {
    r.add(w, rows * in * int64_t(sizeof(bf16)));
  }
}
}  // namespace

L2Ranges CudaBackend::o_proj_weights(const DeviceLayer& L) const {
  const FlintConfig& c = model_.config;
  L2Ranges r;
  if (l2_prefetch_mask_ & 1) add_linear(r, L.wo, L.nv_o, c.hidden_size, c.q_dim());
  return r;
}

L2Ranges CudaBackend::ffn_and_next_qkv_weights(int64_t l) const {
  const FlintConfig& c = model_.config;
  const DeviceLayer& L = model_.layers[size_t(l)];
  const int64_t H = c.hidden_size;
  L2Ranges r;
  if ((l2_prefetch_mask_ & 2) && !c.is_dense_layer(l)) {
    const int64_t Is = c.shared_expert_intermediate_size * c.n_shared_experts;
    add_linear(r, L.sh_gate, L.nv_sh_gate, Is, H);
    add_linear(r, L.sh_up, L.nv_sh_up, Is, H);
    add_linear(r, L.sh_down, L.nv_sh_down, H, Is);
  }
  if ((l2_prefetch_mask_ & 4) && l + 1 < c.num_hidden_layers) {
    const DeviceLayer& N = model_.layers[size_t(l + 1)];
    add_linear(r, N.wqkv, N.nv_qkv, c.q_dim() + 2 * c.kv_dim(), H);
  }
  return r;
}

// Only while a step graph is captured: there the branch becomes graph nodes beside the chain,
// whose programmatic (PDL) edges stay as they are. Uncaptured steps run without it.
void CudaBackend::warm_l2(const L2Ranges& ranges) {
  if (!warming_ || ranges.n == 0) return;
  STRIKER_CUDA_CHECK(cudaEventRecord(ev_fork_, stream_));
  STRIKER_CUDA_CHECK(cudaStreamWaitEvent(prefetch_stream_, ev_fork_, 0));
  l2_prefetch(ranges, prefetch_stream_);
  branch_pending_ = true;
}

void CudaBackend::join_l2_branch() {
  if (!branch_pending_) return;
  STRIKER_CUDA_CHECK(cudaEventRecord(ev_join_, prefetch_stream_));
  STRIKER_CUDA_CHECK(cudaStreamWaitEvent(stream_, ev_join_, 0));
  branch_pending_ = false;
}

}  // namespace striker::cuda
