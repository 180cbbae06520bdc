// NVFP4 grouped expert GEMMs with the weights decoded in registers (moe_grouped_wgmma_nvfp4.h)
// against the NVFP4 references of the grouped path (moe_grouped_*_nvfp4_ref: the scalar codec,
// scale2 on the sum, FLINT.md §4 rounding points) and, after the combine, the per-token
// moe_float_ref. Experts with 0, 1, 63, 64, 65, 127, 128, 129, 300, 513 rows (tile edges, a tile
// of 44 rows), output widths that end inside a 128/256-column block, every scale byte (0x7F,
// 0xFF, subnormals), NaN-poisoned outputs (a row or column left unwritten fails), Flint's shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/moe/moe_grouped_wgmma.h"
#include "backends/cuda/moe/moe_grouped_wgmma_nvfp4.h"
#include "cuda_test_util.h"
#include "moe_grouped_test_util.h"
#include "moe_routing_util.h"

namespace striker::cuda::testing {
namespace {

constexpr int kTm = kMoeWgmmaTileRows;

// The register-decode GEMMs (128-row routing tiles) on NVFP4 stacks.
GroupedGemms direct_gemms(const ScaledNvfp4Experts& w) {
  return [&w](DeviceMoeStep& s, const MoeRouting& r, cudaStream_t stream) {
    moe_grouped_gate_up_nvfp4_direct(s.x.get(), s.T, s.K, s.H, w.ng.view(), w.nu.view(), s.I, r, s.act.get(), stream);
    moe_grouped_down_nvfp4_direct(s.act.get(), s.T, s.K, s.I, w.nd.view(), s.H, r, s.y.get(), stream);
  };
}

// Sort + gate/up + down + combine on this path, each kernel against its reference (check_step:
// gate/up vs moe_grouped_gate_up_nvfp4_ref, down vs moe_grouped_down_nvfp4_ref on the device's
// own act rows, h vs moe_float_ref when `per_token`). Routing tiles of 128 rows (the production sort).
void check(std::mt19937& rng, const ScaledNvfp4Experts& w, const std::vector<int32_t>& ids, int T, int K, int E, int H,
           int I, bool per_token, const std::string& where) {
  check_step(rng, w, direct_gemms(w), ids, T, K, E, H, I, {kTm}, per_token, where);
}

// hidden 320: 5 k slices in gate/up, and down's 320 columns end 64 into a second 256-column
// block; inter 192: gate/up's second 128-column block holds 64 columns, down has 3 k slices.
TEST(CudaMoeGroupedNvfp4Direct, RowCountsAroundTheTileMatchReference) {
  std::mt19937 rng(401);
  const std::vector<int> counts = {128, 129, 0, 1, 300, 64, 65, 127, 0, 63, 513, 2};
  const int E = int(counts.size()), H = 320, I = 192, K = 1;
  const ScaledNvfp4Experts w(rng, E, H, I);
  const auto ids = routing_with_counts(rng, counts);
  check(rng, w, ids, int(ids.size()), K, E, H, I, true, "counts around 128: ");
}

TEST(CudaMoeGroupedNvfp4Direct, RandomRoutingsMatchReference) {
  std::mt19937 rng(402);
  const int E = 16, H = 256, I = 128, K = 6;
  const ScaledNvfp4Experts w(rng, E, H, I);
  for (int T : {2, 9, 300, 2100})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed, RoutingKind::identical}) {
      const auto ids = make_routing(rng, kind, T, K, E);
      check(rng, w, ids, T, K, E, H, I, T <= 300, "T=" + std::to_string(T) + " " + routing_name(kind) + ": ");
    }
}

// Every scale byte, 0x00..0xFF (0x7F decodes to 0, 0xFF to 480, 0x01..0x07 are subnormal), with
// every code: the register decode against the scalar codec.
TEST(CudaMoeGroupedNvfp4Direct, EveryScaleByteMatchesReference) {
  std::mt19937 rng(403);
  const int E = 4, H = 512, I = 128, K = 2, T = 200;
  ScaledNvfp4Experts w(rng, E, H, I);
  for (auto* m : {&w.g, &w.u, &w.d})
    for (size_t i = 0; i < m->scales.size(); ++i) m->scales[i] = uint8_t(i * 37 % 256);
  // Rebuild the device copies and the float weights from the edited scales.
  w.ng.scales.upload(w.g.scales);
  w.nu.scales.upload(w.u.scales);
  w.nd.scales.upload(w.d.scales);
  // Big scales (up to 480·6): keep the sums in range with small scale2.
  for (auto* s2 : {&w.s2g, &w.s2u, &w.s2d})
    for (float& v : *s2) v *= 1.f / 64;
  w.ng.s2.upload(w.s2g);
  w.nu.s2.upload(w.s2u);
  w.nd.s2.upload(w.s2d);
  w.fg = scaled_floats(w.g, int64_t(E) * I, H, w.s2g, int64_t(I) * H);
  w.fu = scaled_floats(w.u, int64_t(E) * I, H, w.s2u, int64_t(I) * H);
  w.fd = scaled_floats(w.d, int64_t(E) * H, I, w.s2d, int64_t(H) * I);
  check(rng, w, make_routing(rng, RoutingKind::uniform, T, K, E), T, K, E, H, I, true, "all scale bytes: ");
}

// Flint's expert shape (hidden 2048, inter 512) on 32 experts: 32 k slices in gate/up (the ring
// wraps many times), four 128-column blocks in gate/up, eight 256-column blocks in down.
TEST(CudaMoeGroupedNvfp4Direct, FullSizeShapesMatchReference) {
  std::mt19937 rng(404);
  const int E = 32, H = 2048, I = 512, K = 6;
  const ScaledNvfp4Experts w(rng, E, H, I);
  check(rng, w, make_routing(rng, RoutingKind::uniform, 256, K, E), 256, K, E, H, I, true, "full size uniform: ");
  check(rng, w, make_routing(rng, RoutingKind::identical, 400, K, E), 400, K, E, H, I, false, "full size identical: ");
}

TEST(CudaMoeGroupedNvfp4Direct, RejectsBadShapesAndStacks) {
  std::mt19937 rng(406);
  const ScaledNvfp4Experts w(rng, 4, 64, 64);
  DeviceRouting d({0, 1}, 1, 2, 4, 64);
  DeviceBuffer<bf16> buf(4096);
  EXPECT_THROW(moe_grouped_gate_up_nvfp4_direct(buf.get(), 1, 2, 64, w.ng.view(), w.nu.view(), 64, d.r, buf.get(),
                                                nullptr),
               Error);  // sorted with 64-row tiles
  MoeRouting r = d.r;
  r.tile_rows = kTm;
  EXPECT_THROW(moe_grouped_down_nvfp4_direct(buf.get(), 1, 2, 32, w.nd.view(), 64, r, buf.get(), nullptr),
               Error);  // reduction width not a multiple of 64
  EXPECT_THROW(moe_grouped_gate_up_nvfp4_direct(buf.get(), 1, 2, 64, Nvfp4Stack{}, w.nu.view(), 64, r, buf.get(),
                                                nullptr),
               Error);  // null stack
  EXPECT_THROW(moe_grouped_down_nvfp4_direct(buf.get() + 1, 1, 2, 64, w.nd.view(), 64, r, buf.get(), nullptr),
               Error);  // misaligned activations
}

}  // namespace
}  // namespace striker::cuda::testing
