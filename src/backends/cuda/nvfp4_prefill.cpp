#include "backends/cuda/nvfp4_prefill.h"

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/elementwise.h"
#include "backends/cuda/embedding.h"
#include "backends/cuda/moe.h"

namespace striker::cuda {

int64_t nvfp4_scratch_elems(const DeviceModel& model) {
  const FlintConfig& c = model.config;
  const int64_t H = c.hidden_size, nh = c.num_attention_heads, nkv = c.num_key_value_heads, d = c.head_dim;
  int64_t need = 0;
  bool any = model.nv_lm_head.present();
  auto take = [&](bool present, int64_t n) {
    if (!present) return;
    any = true;
    need = std::max(need, n);
  };
  for (const DeviceLayer& L : model.layers) {
    take(L.nv_qkv.present(), (nh + 2 * nkv) * d * H);
    take(L.nv_o.present(), H * nh * d);
    take(L.nv_gate.present() || L.nv_up.present() || L.nv_down.present(), c.intermediate_size * H);
    take(L.nv_exp_gate.present(), c.moe_intermediate_size * H);
    take(L.nv_sh_gate.present(), c.shared_expert_intermediate_size * H);
  }
  if (!any) return 0;
  // The LM head ([V, H], 620 MB as bf16 at full size) runs in chunks of this buffer.
  return std::max<int64_t>(need, int64_t(8) << 20);
}

void nvfp4_gemm(LtGemm& lt, const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim, bf16* y,
                int ld_y, Nvfp4Scratch scratch, cudaStream_t stream) {
  if (T <= 0 || out_dim <= 0) return;
  const int64_t chunk = std::min<int64_t>(scratch.elems / std::max(in, 1) / 8 * 8, out_dim);
  if (scratch.data == nullptr || chunk < std::min(out_dim, 8))
    throw Error("nvfp4_gemm: dequantisation scratch of " + std::to_string(scratch.elems) +
                " values is too small for rows of " + std::to_string(in));
  for (int r0 = 0; r0 < out_dim;) {
    const int r1 = int(std::min<int64_t>({int64_t(out_dim), r0 + chunk, int64_t(scale2.next_boundary(r0))}));
    const Nvfp4Matrix rows{W.codes + int64_t(r0) * (in / 2), W.scales + int64_t(r0) * (in / 16)};
    nvfp4_dequantize(rows, r1 - r0, in, scratch.data, stream);
    lt.gemm_bf16_scaled(x, T, in, scratch.data, r1 - r0, y + r0, ld_y, scale2.at(r0), stream);
    r0 = r1;
  }
}

namespace {

// One expert's [rows, in] matrix inside a stack.
Nvfp4Matrix expert_matrix(const Nvfp4Experts& s, int64_t e, int64_t rows, int64_t in) {
  return {s.codes + e * rows * in / 2, s.scales + e * rows * in / 16};
}

}  // namespace

int64_t nvfp4_stack_scratch_elems(const DeviceModel& model) {
  const FlintConfig& c = model.config;
  for (const DeviceLayer& L : model.layers)
    if (L.nv_exp_gate.present()) return c.n_routed_experts * c.moe_intermediate_size * c.hidden_size;
  return 0;
}

void nvfp4_moe_prefill(LtGemm& lt, const DeviceLayer& L, const FlintConfig& c, int T, const MoePrefillBuffers& b,
                       Nvfp4Scratch scratch, Nvfp4Scratch stack_scratch, cudaStream_t stream) {
  const int H = int(c.hidden_size), I = int(c.moe_intermediate_size), Is = int(c.shared_expert_intermediate_size),
            K = int(c.num_experts_per_tok), E = int(c.n_routed_experts), slots = T * K;
  if (!L.nv_exp_gate.present()) throw Error("nvfp4_moe_prefill: the layer's routed experts are not NVFP4");
  // Routing to the host, counting sort of the T·K slots by expert (as CudaBackend::moe_prefill).
  STRIKER_CUDA_CHECK(cudaMemcpyAsync(b.ids_host, b.topk_ids, size_t(slots) * 4, cudaMemcpyDeviceToHost, stream));
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<int32_t> offset(size_t(E) + 1, 0), cursor;
  for (int s = 0; s < slots; ++s) {
    const int32_t e = b.ids_host[s];
    if (e < 0 || e >= E) throw Error("CUDA backend: router produced expert id " + std::to_string(e));
    ++offset[size_t(e) + 1];
  }
  int active = 0;
  for (int e = 0; e < E; ++e) {
    active += offset[size_t(e) + 1] > 0;
    offset[size_t(e) + 1] += offset[size_t(e)];
  }
  cursor.assign(offset.begin(), offset.end() - 1);
  int32_t* sorted_token = b.sort_host;
  int32_t* inv = b.sort_host + slots;
  for (int s = 0; s < slots; ++s) {
    const int32_t pos = cursor[size_t(b.ids_host[s])]++;
    sorted_token[pos] = s / K;
    inv[s] = pos;
  }
  STRIKER_CUDA_CHECK(cudaMemcpyAsync(b.d_sort, b.sort_host, size_t(slots) * 8, cudaMemcpyHostToDevice, stream));
  embedding_gather(b.x, T, H, b.d_sort, slots, b.xs_sorted, stream);  // x rows in expert order
  // A whole stack costs one launch and E·rows·in bf16 writes; per expert, a launch each.
  const bool whole = stack_scratch.data != nullptr && stack_scratch.elems >= int64_t(E) * I * H && active * 4 >= E;
  // out[sorted rows of e] = bf16(scale2_e · mm(in[sorted rows of e], W_e)) for every selected e.
  auto experts = [&](const Nvfp4Experts& W, int rows, int in, const bf16* x_sorted, bf16* out_sorted) {
    if (whole) nvfp4_dequantize({W.codes, W.scales}, int64_t(E) * rows, in, stack_scratch.data, stream);
    for (int e = 0; e < E; ++e) {
      const int n = offset[size_t(e) + 1] - offset[size_t(e)], off = offset[size_t(e)];
      if (n == 0) continue;
      const float s2 = W.scale2_host[size_t(e)];
      const bf16* xe = x_sorted + int64_t(off) * in;
      bf16* ye = out_sorted + int64_t(off) * rows;
      if (whole)
        lt.gemm_bf16_scaled(xe, n, in, stack_scratch.data + int64_t(e) * rows * in, rows, ye, rows, s2, stream);
      else
        nvfp4_gemm(lt, xe, n, in, expert_matrix(W, e, rows, in), RowScale2::uniform(s2), rows, ye, rows, scratch,
                   stream);
    }
  };
  experts(L.nv_exp_gate, I, H, b.xs_sorted, b.g_sorted);
  experts(L.nv_exp_up, I, H, b.xs_sorted, b.u_sorted);
  swiglu_act(b.g_sorted, b.u_sorted, b.a_sorted, int64_t(slots) * I, stream);
  experts(L.nv_exp_down, H, I, b.a_sorted, b.y_sorted);  // bf16(mm(a, Wd)) per expert
  const bool has_shared = L.nv_sh_gate.present() || L.sh_gate != nullptr;
  if (has_shared) {  // shared expert: plain SwiGLU over the chunk, bf16 output in sh_out
    if (L.nv_sh_gate.present()) {
      nvfp4_gemm(lt, b.x, T, H, L.nv_sh_gate.matrix(), L.nv_sh_gate.scale2, Is, b.sh_gate, Is, scratch, stream);
      nvfp4_gemm(lt, b.x, T, H, L.nv_sh_up.matrix(), L.nv_sh_up.scale2, Is, b.sh_up, Is, scratch, stream);
    } else {
      lt.gemm_bf16(b.x, T, H, L.sh_gate, Is, b.sh_gate, stream);
      lt.gemm_bf16(b.x, T, H, L.sh_up, Is, b.sh_up, stream);
    }
    swiglu_act(b.sh_gate, b.sh_up, b.sh_act, int64_t(T) * Is, stream);
    if (L.nv_sh_down.present())
      nvfp4_gemm(lt, b.sh_act, T, Is, L.nv_sh_down.matrix(), L.nv_sh_down.scale2, H, b.sh_out, H, scratch, stream);
    else
      lt.gemm_bf16(b.sh_act, T, Is, L.sh_down, H, b.sh_out, stream);
  }
  moe_combine_sorted(b.y_sorted, b.d_sort + slots, b.topk_w, has_shared ? b.sh_out : nullptr, T, K, H, b.h, stream);
}

}  // namespace striker::cuda
