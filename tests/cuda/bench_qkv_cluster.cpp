// The attention front of a decode step at Flint's shape (x [T, 2048], Wqkv 5120 × 2048, 32 q / 4 kv
// heads of 128, RoPE, positions near 100K): the old pair of launches (gemv_bf16, then
// qk_norm_rope_kv_write; NVFP4: nvfp4_gemv with the default variant, then the same) against the single
// cluster launch (qkv_rope_kv_cluster / _nvfp4), weights rotated
// over copies so neither reads them from L2. Check: the new outputs (q, k and v of the cache rows
// written) equal the old ones bit for bit; GB/s counts the weights once (NVFP4: codes + scales).
#include <cstring>

#include "backends/cuda/gemv.h"
#include "backends/cuda/qk_rope_kv.h"
#include "backends/cuda/qkv_rope_cluster.h"
#include "bench_kernels.h"
#include "bench_util.h"

namespace striker::cuda::testing {

void bench_qkv_cluster(std::mt19937& rng, int T, bool nvfp4) {
  const HeadShape hs{32, 4, 128};
  const int in = 2048, qkv_dim = 40 * 128, B = 16, num_blocks = 64;
  const double wbytes = nvfp4 ? double(in) * qkv_dim * (0.5 + 1.0 / 16) : double(in) * qkv_dim * 2;
  const int nc = copies_for(wbytes);
  const auto x = random_bf16(rng, size_t(T) * in);
  std::vector<DeviceBuffer<bf16>> ws;
  std::vector<DeviceBuffer<uint8_t>> codes, scales;
  if (nvfp4) {
    for (int i = 0; i < nc; ++i) {
      codes.emplace_back(size_t(qkv_dim) * (in / 2));
      scales.emplace_back(size_t(qkv_dim) * (in / 16));
      nvfp4_fill_random(codes.back().get(), scales.back().get(), qkv_dim, in, 77, 0x30, 0x3F, nullptr);
    }
  } else {
    const auto W = random_bf16(rng, size_t(qkv_dim) * in, 0.05f);
    for (int i = 0; i < nc; ++i) ws.emplace_back(W);
  }
  const RowScale2 s2{32 * 128, 36 * 128, {0.004f, 0.0031f, 0.0057f}};
  auto nvm = [&](int i) { return Nvfp4Matrix{codes[size_t(i % nc)].get(), scales[size_t(i % nc)].get()}; };
  const auto qw = random_f32(rng, 128, 1.f, 0.2f), kw = random_f32(rng, 128, 1.f, 0.2f);
  const auto inv = rope_inv_freq(10000.f, 128);
  std::vector<int32_t> pos;
  std::vector<int64_t> slots;
  for (int t = 0; t < T; ++t) {
    pos.push_back(99999 + t);
    slots.push_back(int64_t(t * 17 + 3) % (num_blocks * B));
  }
  const size_t cache = size_t(num_blocks) * 4 * B * 128;
  DeviceBuffer<bf16> d_x(x), d_qkv(size_t(T) * qkv_dim);
  DeviceBuffer<bf16> d_k[2] = {DeviceBuffer<bf16>(cache), DeviceBuffer<bf16>(cache)};
  DeviceBuffer<bf16> d_v[2] = {DeviceBuffer<bf16>(cache), DeviceBuffer<bf16>(cache)};
  DeviceBuffer<bf16> d_q[2] = {DeviceBuffer<bf16>(size_t(T) * 32 * 128), DeviceBuffer<bf16>(size_t(T) * 32 * 128)};
  DeviceBuffer<float> d_qw(qw), d_kw(kw), d_inv(inv);
  DeviceBuffer<int32_t> d_pos(pos);
  DeviceBuffer<int64_t> d_slots(slots);
  auto old_pair = [&](int i) {
    if (nvfp4) nvfp4_gemv(d_x.get(), T, in, nvm(i), s2, qkv_dim, d_qkv.get(), nullptr);
    else gemv_bf16(d_x.get(), T, in, ws[size_t(i % nc)].get(), qkv_dim, d_qkv.get(), nullptr);
    qk_norm_rope_kv_write(d_qkv.get(), T, hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(), d_inv.get(), d_slots.get(),
                          B, d_k[0].get(), d_v[0].get(), d_q[0].get(), nullptr);
  };
  auto fused = [&](int i) {
    if (nvfp4)
      qkv_rope_kv_cluster_nvfp4(d_x.get(), T, in, nvm(i), s2, hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(),
                                d_inv.get(), d_slots.get(), B, d_k[1].get(), d_v[1].get(), d_q[1].get(), nullptr);
    else
      qkv_rope_kv_cluster(d_x.get(), T, in, ws[size_t(i % nc)].get(), hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(),
                          d_inv.get(), d_slots.get(), B, d_k[1].get(), d_v[1].get(), d_q[1].get(), nullptr);
  };
  for (int j = 0; j < 2; ++j) {
    d_k[j].poison();
    d_v[j].poison();
    d_q[j].poison();
  }
  old_pair(0);
  fused(0);
  // Bit comparison as a Comparison: any differing bf16 (NaN included) counts as a failure.
  Comparison c;
  const std::vector<bf16> a[3] = {d_q[0].download(), d_k[0].download(), d_v[0].download()};
  const std::vector<bf16> b[3] = {d_q[1].download(), d_k[1].download(), d_v[1].download()};
  for (int j = 0; j < 3; ++j)
    for (size_t i = 0; i < a[j].size(); ++i)
      if (std::memcmp(&a[j][i], &b[j][i], sizeof(bf16)) != 0) ++c.nan_count;
  const std::string t = std::string(nvfp4 ? " nvfp4" : "") + " T=" + std::to_string(T);
  row("qkv gemv + qk-rope (2 launches)" + t, nullptr, time_us(old_pair), wbytes);
  row("qkv+qk-rope cluster (1 launch)" + t, &c, time_us(fused), wbytes, c.nan_count ? "BITS DIFFER" : "bit-identical");
}

}  // namespace striker::cuda::testing
