// The one-launch MoE block of 1-token steps (moe_decode_fused.h) against the CPU references
// composed (rmsnorm_ref -> router_topk_ref -> moe_ref) and, bit for bit, against the three
// launches it replaces (router_topk with its input norm, moe_gate_up, moe_down_combine).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_decode_fused.h"
#include "backends/cuda/moe/router.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

constexpr float kEps = 1e-6f;

// Uniform values of standard deviation `scale` (xorshift: the Flint-shaped stacks hold 805M values).
std::vector<bf16> fast_random_bf16(uint64_t seed, size_t n, float scale) {
  std::vector<bf16> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  const float k = scale * 1.7320508f / 2147483648.f;
  for (auto& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = float_to_bf16(float(int32_t(uint32_t(s >> 32))) * k);
  }
  return v;
}

struct Shape {
  int H, E, K, I, Is;  // Is = 0: no shared expert
  std::string name() const {
    return "H=" + std::to_string(H) + " E=" + std::to_string(E) + " K=" + std::to_string(K) + " I=" +
           std::to_string(I) + " Is=" + std::to_string(Is);
  }
};

// One MoE layer's weights, on the host and the device; the router as bf16 or fp32 (fp32 values
// that are not bf16: the fp32 path's loads).
struct Layer {
  Shape s;
  bool f32_router;
  std::vector<float> gamma, bias, rf;  // rf: the router as fp32 values (exact copies of rb when bf16)
  std::vector<bf16> rb, wg, wu, wd, sg, su, sd;
  DeviceBuffer<float> d_gamma, d_bias, d_rf;
  DeviceBuffer<bf16> d_rb, d_wg, d_wu, d_wd, d_sg, d_su, d_sd;

  Layer(const Shape& shape, bool f32, uint64_t seed) : s(shape), f32_router(f32) {
    std::mt19937 rng{uint32_t(seed)};
    gamma = random_f32(rng, size_t(s.H), 1.f, 0.3f);
    bias = random_f32(rng, size_t(s.E), 0.f, 0.05f);
    rb = random_bf16(rng, size_t(s.E) * s.H, 0.03f);
    rf = f32 ? random_f32(rng, rb.size(), 0.f, 0.03f) : to_float(rb);
    const float gs = 2.f / std::sqrt(float(s.H)), ds = 1.f / std::sqrt(float(s.I));
    wg = fast_random_bf16(seed + 1, size_t(s.E) * s.I * s.H, gs);
    wu = fast_random_bf16(seed + 2, wg.size(), gs);
    wd = fast_random_bf16(seed + 3, size_t(s.E) * s.H * s.I, ds);
    if (s.Is > 0) {
      sg = fast_random_bf16(seed + 4, size_t(s.Is) * s.H, gs);
      su = fast_random_bf16(seed + 5, sg.size(), gs);
      sd = fast_random_bf16(seed + 6, size_t(s.H) * s.Is, 1.f / std::sqrt(float(s.Is)));
    }
    d_gamma = DeviceBuffer<float>(gamma), d_bias = DeviceBuffer<float>(bias), d_rf = DeviceBuffer<float>(rf);
    d_rb = DeviceBuffer<bf16>(rb), d_wg = DeviceBuffer<bf16>(wg), d_wu = DeviceBuffer<bf16>(wu);
    d_wd = DeviceBuffer<bf16>(wd);
    if (s.Is > 0) d_sg = DeviceBuffer<bf16>(sg), d_su = DeviceBuffer<bf16>(su), d_sd = DeviceBuffer<bf16>(sd);
  }
  RouterShape rs() const { return RouterShape{s.H, s.E, s.K, true, 2.5f}; }
  bool shared() const { return s.Is > 0; }
  MoeFusedWeights fused() const {
    MoeFusedWeights w;
    w.post_gamma = d_gamma.get();
    w.eps = kEps;
    w.router_bf16 = f32_router ? nullptr : d_rb.get();
    w.router_f32 = f32_router ? d_rf.get() : nullptr;
    w.router_bias = d_bias.get();
    w.gate = d_wg.get(), w.up = d_wu.get(), w.down = d_wd.get(), w.inter = s.I;
    if (shared()) w.shared_gate = d_sg.get(), w.shared_up = d_su.get(), w.shared_down = d_sd.get();
    w.shared_inter = s.Is;
    return w;
  }
  // The CPU references composed: h = h + moe(rmsnorm(h)); the routing out.
  void reference(std::vector<bf16>& h, std::vector<int32_t>& ids, std::vector<float>& tw) const {
    std::vector<bf16> x;
    rmsnorm_ref(h, gamma, x, 1, s.H, kEps);
    router_topk_ref(x, 1, rs(), rf, &bias, ids, tw);
    moe_ref(x, 1, s.H, s.I, s.Is,
            MoeRefWeights{&wg, &wu, &wd, shared() ? &sg : nullptr, shared() ? &su : nullptr, shared() ? &sd : nullptr},
            ids, tw, s.K, h);
  }
};

// The three launches of the old path (scratch buffers of its own).
struct OldPath {
  DeviceBuffer<unsigned int> counter = zero_counters(kRouterSyncWords);
  DeviceBuffer<float> logits{1024};
  DeviceBuffer<bf16> x{2048}, act{8 * 512}, sact{512};
  void run(const Layer& L, bf16* h, int32_t* ids, float* tw, cudaStream_t stream) {
    const RouterInputNorm in{L.d_gamma.get(), kEps, x.get()};
    router_topk(h, 1, L.rs(), L.f32_router ? nullptr : L.d_rb.get(), L.f32_router ? L.d_rf.get() : nullptr,
                L.d_bias.get(), logits.get(), counter.get(), ids, tw, stream, &in);
    moe_gate_up(x.get(), 1, L.s.H, L.d_wg.get(), L.d_wu.get(), L.s.I, ids, L.s.K, act.get(), L.d_sg.get(),
                L.d_su.get(), L.s.Is, L.shared() ? sact.get() : nullptr, stream);
    moe_down_combine(act.get(), 1, L.s.K, L.d_wd.get(), L.s.I, L.s.H, ids, tw, L.shared() ? sact.get() : nullptr,
                     L.d_sd.get(), L.s.Is, h, stream);
  }
};

size_t bits_differ(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  size_t n = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i].bits != b[i].bits;
  return n;
}
template <typename T>
size_t words_differ(const std::vector<T>& a, const std::vector<T>& b) {
  size_t n = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return n;
}

const Shape kShapes[] = {
    {2048, 256, 6, 512, 512},  // Flint
    {2048, 256, 6, 512, 0},    // Flint without the shared expert
    {256, 16, 6, 64, 64},      // the tiny config
    {264, 40, 4, 72, 40},      // no multiple of anything; shared width differs from routed
    {1000, 100, 8, 136, 0},    // top-8, no shared expert
    {1016, 70, 7, 504, 16},    // top-7 + shared: all 8 slots
};

// One launch, fresh random h, against the CPU references and bit for bit against the old path:
// h, ids and weights; ids and weights poisoned before the launch.
TEST(CudaMoeFused, MatchesReferenceAndThreeLaunchPath) {
  uint64_t seed = 100;
  DeviceBuffer<unsigned long long> sync(std::vector<unsigned long long>(kMoeFusedSyncWords, 0ull));
  OldPath old;
  for (const Shape& s : kShapes)
    for (bool f32 : {false, true}) {
      if (s.H == 2048 && s.Is == 0 && f32) continue;  // the Flint stacks are the slow part: one router there
      SCOPED_TRACE(s.name() + (f32 ? " f32 router" : " bf16 router"));
      const Layer L(s, f32, seed += 10);
      ASSERT_TRUE(moe_decode_fused_fits(L.rs(), s.I, s.Is, L.shared()));
      std::mt19937 rng{uint32_t(seed)};
      const auto h = random_bf16(rng, size_t(s.H), 2.f);
      std::vector<bf16> h_ref = h;
      std::vector<int32_t> ref_ids;
      std::vector<float> ref_w;
      L.reference(h_ref, ref_ids, ref_w);

      DeviceBuffer<bf16> d_h(h), d_h_old(h);
      DeviceBuffer<int32_t> d_ids(size_t(s.K)), d_ids_old(size_t(s.K));
      DeviceBuffer<float> d_w(size_t(s.K)), d_w_old(size_t(s.K));
      d_ids.poison(), d_w.poison(), d_ids_old.poison(), d_w_old.poison();
      moe_decode_fused(d_h.get(), L.rs(), L.fused(), sync.get(), d_ids.get(), d_w.get(), nullptr);
      old.run(L, d_h_old.get(), d_ids_old.get(), d_w_old.get(), nullptr);
      const auto got = d_h.download(), got_old = d_h_old.download();
      const auto ids = d_ids.download();
      const auto w = d_w.download();
      EXPECT_EQ(ids, ref_ids);
      const auto cw = compare(w, ref_w, 1e-5, 1e-6);
      EXPECT_TRUE(cw.ok()) << "weights vs the CPU router: " << cw.describe();
      const auto ch = compare(got, h_ref, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(ch.ok()) << "h vs the CPU references: " << ch.describe();
      EXPECT_EQ(bits_differ(got, got_old), 0u) << "h vs the three launches";
      for (int variant : {0, 1, 3, 4, 5, 6, 7}) {  // the other (temporary) variants: the same bits
        d_h.upload(h);
        moe_decode_fused(d_h.get(), L.rs(), L.fused(), sync.get(), d_ids.get(), d_w.get(), nullptr, variant);
        EXPECT_EQ(bits_differ(d_h.download(), got_old), 0u) << "variant " << variant;
      }
      EXPECT_EQ(ids, d_ids_old.download()) << "ids vs the decode router";
      EXPECT_EQ(words_differ(w, d_w_old.download()), 0u) << "weight bits vs the decode router";
    }
}

// Two layers back to back on one stream (no sync between: the second launch's early part
// overlaps the first's tail under PDL), the same sync words throughout; then the two launches
// captured in a CUDA graph and replayed twice from the same h: every run the same bits as the
// old path's two layers, and within tolerance of the references composed.
TEST(CudaMoeFused, ConsecutiveLayersAndGraphReplays) {
  for (const Shape& s : {Shape{2048, 256, 6, 512, 512}, Shape{264, 40, 4, 72, 40}}) {
    SCOPED_TRACE(s.name());
    const Layer L1(s, false, 7), L2(s, s.H != 2048, 8);  // the second odd layer has an fp32 router
    std::mt19937 rng(9);
    const auto h = random_bf16(rng, size_t(s.H), 2.f);
    std::vector<bf16> h_ref = h;
    std::vector<int32_t> ids;
    std::vector<float> tw;
    L1.reference(h_ref, ids, tw);
    L2.reference(h_ref, ids, tw);

    cudaStream_t stream;
    STRIKER_CUDA_CHECK(cudaStreamCreate(&stream));  // blocking: ordered after the uploads
    DeviceBuffer<unsigned long long> sync(std::vector<unsigned long long>(kMoeFusedSyncWords, 0ull));
    DeviceBuffer<bf16> d_h(h), d_h_old(h);
    DeviceBuffer<int32_t> d_ids(size_t(s.K)), d_ids_old(size_t(s.K));
    DeviceBuffer<float> d_w(size_t(s.K)), d_w_old(size_t(s.K));
    OldPath old;
    old.run(L1, d_h_old.get(), d_ids_old.get(), d_w_old.get(), stream);
    old.run(L2, d_h_old.get(), d_ids_old.get(), d_w_old.get(), stream);
    const auto want = d_h_old.download();
    const auto ch = compare(want, h_ref, 3 * kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(ch.ok()) << "old path vs the CPU references: " << ch.describe();

    for (int rep = 0; rep < 9; ++rep) {  // plain launches, nine times over the same words (variants 2, then 0..7)
      const int variant = rep == 0 ? 2 : rep - 1;
      d_h.upload(h);
      d_ids.poison();
      moe_decode_fused(d_h.get(), L1.rs(), L1.fused(), sync.get(), d_ids.get(), d_w.get(), stream, variant);
      moe_decode_fused(d_h.get(), L2.rs(), L2.fused(), sync.get(), d_ids.get(), d_w.get(), stream, variant);
      STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream));
      EXPECT_EQ(bits_differ(d_h.download(), want), 0u) << "plain launches, round " << rep;
      EXPECT_EQ(d_ids.download(), d_ids_old.download()) << "the second layer's ids, round " << rep;
    }
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    STRIKER_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    moe_decode_fused(d_h.get(), L1.rs(), L1.fused(), sync.get(), d_ids.get(), d_w.get(), stream);
    moe_decode_fused(d_h.get(), L2.rs(), L2.fused(), sync.get(), d_ids.get(), d_w.get(), stream);
    STRIKER_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    STRIKER_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 2; ++rep) {
      d_h.upload(h);
      d_w.poison();
      STRIKER_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream));
      EXPECT_EQ(bits_differ(d_h.download(), want), 0u) << "graph replay " << rep;
      EXPECT_EQ(words_differ(d_w.download(), d_w_old.download()), 0u) << "the second layer's weights, replay " << rep;
    }
    STRIKER_CUDA_CHECK(cudaGraphExecDestroy(exec));
    STRIKER_CUDA_CHECK(cudaGraphDestroy(graph));
    STRIKER_CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

}  // namespace
}  // namespace striker::cuda::testing
