#include "backends/cuda/nvfp4/nvfp4_prefill.h"

#include <algorithm>
#include <string>

#include "backends/cuda/common/cuda_check.h"

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

}  // namespace striker::cuda
