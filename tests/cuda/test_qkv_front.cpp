// The QKV projection with the attention front in its epilogue (qkv_front.h), BF16 and NVFP4, 1..8
// tokens: its projection must be the decode GEMV's (bit for bit where the same kernel family runs,
// against the CPU reference at BF16 T = 1), and its q, k cache and v cache must be, bit for bit,
// what qk_norm_rope_kv_write makes of that projection (and close to the CPU reference). Outputs and
// caches start NaN-poisoned, so anything not written shows.
#include <gtest/gtest.h>

#include <string>

#include "backends/cuda/attention/qk_rope_kv.h"
#include "backends/cuda/attention/qkv_front.h"
#include "backends/cuda/linear/gemv.h"
#include "moe_grouped_test_util.h"

namespace striker::cuda::testing {
namespace {

struct FrontCase {
  int nh, nkv, in;
};

size_t bit_differences(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  if (a.size() != b.size()) return a.size() + b.size();
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i].bits != b[i].bits;
  return n;
}

void run_front_case(const FrontCase& fc, int T, bool rope, bool nvfp4, std::mt19937& rng) {
  const int d = 128, B = 16, num_blocks = 24;
  const HeadShape hs{fc.nh, fc.nkv, d};
  const int rows = (fc.nh + 2 * fc.nkv) * d;
  std::vector<int32_t> positions;
  std::vector<int64_t> slots;
  for (int t = 0; t < T; ++t) {
    positions.push_back(int32_t((t * 7919 + 3) % 262144));
    slots.push_back(int64_t(t * 37 + 5) % (num_blocks * B));
  }
  const auto x = random_bf16(rng, size_t(T) * fc.in);
  const auto qw = random_f32(rng, size_t(d), 1.f, 0.2f), kw = random_f32(rng, size_t(d), 1.f, 0.2f);
  const auto inv = rope_inv_freq(10000.f, d);
  DeviceBuffer<bf16> d_x(x);
  DeviceBuffer<float> d_qw(qw), d_kw(kw), d_inv(inv);
  DeviceBuffer<int32_t> d_pos(positions);
  DeviceBuffer<int64_t> d_slots(slots);
  const size_t cache_elems = size_t(num_blocks) * fc.nkv * B * d, q_elems = size_t(T) * fc.nh * d;
  // [0]: the fused launch, [1]: the decode GEMV then qk_norm_rope_kv_write.
  DeviceBuffer<bf16> k[2] = {DeviceBuffer<bf16>(cache_elems), DeviceBuffer<bf16>(cache_elems)};
  DeviceBuffer<bf16> v[2] = {DeviceBuffer<bf16>(cache_elems), DeviceBuffer<bf16>(cache_elems)};
  DeviceBuffer<bf16> q[2] = {DeviceBuffer<bf16>(q_elems), DeviceBuffer<bf16>(q_elems)};
  DeviceBuffer<bf16> qkv[2] = {DeviceBuffer<bf16>(size_t(T) * rows), DeviceBuffer<bf16>(size_t(T) * rows)};
  for (int i = 0; i < 2; ++i) k[i].poison(), v[i].poison(), q[i].poison(), qkv[i].poison();
  auto front = [&](int i) {
    return AttentionFront{hs,           d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(), rope ? d_inv.get() : nullptr,
                          d_slots.get(), B,         k[i].get(), v[i].get(), q[i].get()};
  };

  std::vector<float> dot;  // unrounded CPU projection (BF16 T = 1 only)
  if (nvfp4) {
    const auto W = random_nvfp4(rng, rows, fc.in);
    // q|k|v with their own scale2 (the boundaries are head boundaries, as in a checkpoint).
    const RowScale2 s2{fc.nh * d, (fc.nh + fc.nkv) * d, {0.0137f, 0.0021f, 0.0433f}};
    DeviceBuffer<uint8_t> codes(W.codes), scales(W.scales);
    const Nvfp4Matrix m{codes.get(), scales.get()};
    qkv_front_nvfp4(d_x.get(), T, fc.in, m, s2, front(0), qkv[0].get(), nullptr);
    nvfp4_gemv(d_x.get(), T, fc.in, m, s2, rows, qkv[1].get(), nullptr);
  } else {
    const auto W = random_bf16(rng, size_t(rows) * fc.in, 0.05f);
    DeviceBuffer<bf16> d_W(W);
    qkv_front_bf16(d_x.get(), T, fc.in, d_W.get(), front(0), qkv[0].get(), nullptr);
    gemv_bf16(d_x.get(), T, fc.in, d_W.get(), rows, qkv[1].get(), nullptr);
    if (T == 1) gemv_ref(x, T, fc.in, W, rows, dot);
  }
  const auto proj = qkv[0].download();
  if (dot.empty()) {  // the same kernel family as the decode GEMV: the same bits
    EXPECT_EQ(bit_differences(proj, qkv[1].download()), 0u) << "projection vs the decode GEMV";
  } else {  // BF16 at one token: the skinny tensor-core kernel, not gemv_bf16's CUDA-core one
    std::vector<float> ref(dot.size());
    for (size_t i = 0; i < dot.size(); ++i) ref[i] = round_bf16(dot[i]);
    const auto c = compare(to_float(proj), ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "projection vs the CPU reference: " << c.describe();
  }
  // The unfused front over the fused launch's own projection.
  std::vector<bf16> ref_k = k[1].download(), ref_v = v[1].download(), ref_q;  // all poison
  const AttentionFront f1 = front(1);
  qk_norm_rope_kv_write(qkv[0].get(), T, hs, f1.q_norm_w, f1.k_norm_w, f1.eps, f1.positions, f1.inv_freq, f1.slots,
                        B, f1.k_cache, f1.v_cache, f1.q_out, nullptr);
  qk_norm_rope_kv_write_ref(proj, T, hs, qw, kw, 1e-6f, positions, rope ? &inv : nullptr, slots, B, ref_k, ref_v,
                            ref_q);
  const char* names[3] = {"q", "k cache", "v cache"};
  DeviceBuffer<bf16>* outs[3] = {q, k, v};
  const std::vector<bf16>* refs[3] = {&ref_q, &ref_k, &ref_v};
  for (int m = 0; m < 3; ++m) {
    const auto got = outs[m][0].download();
    EXPECT_EQ(bit_differences(got, outs[m][1].download()), 0u) << names[m] << ": fused vs qk_norm_rope_kv_write";
    const auto c = compare(got, *refs[m], m == 2 ? 0.0 : 2 * kBf16Rtol, m == 2 ? 0.0 : kBf16Atol);
    EXPECT_TRUE(c.ok()) << names[m] << " vs the CPU reference: " << c.describe();
  }
}

// Flint's shape (2048 wide: split-K 8, clusters of 8 CTAs; NVFP4 from 2 tokens split 4) and a
// narrow one (256 wide: BF16 split 2, NVFP4 split 1, so clusters of 2 and 1), one KV head.
TEST(CudaQkvFront, Bf16MatchesGemvThenQkRopeKvWrite) {
  std::mt19937 rng(71);
  for (FrontCase fc : {FrontCase{32, 4, 2048}, FrontCase{8, 1, 256}})
    for (int T : {1, 2, 3, 5, 8})
      for (bool rope : {true, false}) {
        SCOPED_TRACE("in=" + std::to_string(fc.in) + " T=" + std::to_string(T) + (rope ? " rope" : " nope"));
        run_front_case(fc, T, rope, false, rng);
      }
}

TEST(CudaQkvFront, Nvfp4MatchesGemvThenQkRopeKvWrite) {
  std::mt19937 rng(72);
  for (FrontCase fc : {FrontCase{32, 4, 2048}, FrontCase{8, 1, 256}})
    for (int T : {1, 2, 3, 5, 8})
      for (bool rope : {true, false}) {
        SCOPED_TRACE("in=" + std::to_string(fc.in) + " T=" + std::to_string(T) + (rope ? " rope" : " nope"));
        run_front_case(fc, T, rope, true, rng);
      }
}

TEST(CudaQkvFront, RejectsUnbuiltSteps) {
  const AttentionFront f{HeadShape{8, 1, 64}};
  EXPECT_FALSE(qkv_front_supported(1, f.heads));
  EXPECT_FALSE(qkv_front_supported(9, HeadShape{8, 1, 128}));
  EXPECT_THROW(qkv_front_bf16(nullptr, 1, 256, nullptr, f, nullptr, nullptr), Error);
}

}  // namespace
}  // namespace striker::cuda::testing
