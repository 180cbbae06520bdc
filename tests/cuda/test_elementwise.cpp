// Embedding gather and RMSNorm against their CPU references.
#include <gtest/gtest.h>

#include "backends/cuda/embedding.h"
#include "backends/cuda/rmsnorm.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

TEST(CudaEmbedding, GathersRowsAndMarksInvalidIdsNaN) {
  std::mt19937 rng(11);
  for (int64_t hidden : {200, 203, 2048}) {  // 203: the unaligned scalar path
    const int64_t vocab = 997;
    auto table = random_bf16(rng, size_t(vocab * hidden));
    std::vector<int32_t> ids = {0, 996, 5, -3, 1000, 17, 17};
    std::uniform_int_distribution<int32_t> pick(0, int32_t(vocab - 1));
    for (int i = 0; i < 20; ++i) ids.push_back(pick(rng));
    std::vector<bf16> ref;
    embedding_gather_ref(table, vocab, hidden, ids, ref);
    DeviceBuffer<bf16> d_table(table), d_out(ids.size() * size_t(hidden));
    DeviceBuffer<int32_t> d_ids(ids);
    d_out.poison();
    embedding_gather(d_table.get(), vocab, hidden, d_ids.get(), int(ids.size()), d_out.get(), nullptr);
    const auto got = d_out.download();
    const auto c = compare(got, ref, 0.0, 0.0);  // a gather is exact
    EXPECT_TRUE(c.ok()) << "hidden=" << hidden << " " << c.describe();
  }
}

TEST(CudaRmsNorm, MatchesReferenceWithSpecRounding) {
  std::mt19937 rng(12);
  for (int hidden : {130, 2000, 2048, 8200}) {
    const int rows = 5;
    auto x = random_bf16(rng, size_t(rows) * hidden, 3.f);
    auto w = random_f32(rng, size_t(hidden), 1.f, 0.3f);
    std::vector<bf16> ref;
    rmsnorm_ref(x, w, ref, rows, hidden, 1e-6f);
    DeviceBuffer<bf16> d_x(x), d_out(x.size());
    DeviceBuffer<float> d_w(w);
    d_out.poison();
    rmsnorm(d_x.get(), d_w.get(), d_out.get(), rows, hidden, 1e-6f, nullptr);
    const auto c = compare(d_out.download(), ref, kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << "hidden=" << hidden << " " << c.describe();
  }
}

TEST(CudaRmsNorm, ResidualAddThenNorm) {
  std::mt19937 rng(13);
  const int rows = 3, hidden = 2048 + 24;
  auto h = random_bf16(rng, size_t(rows) * hidden, 2.f);
  auto delta = random_bf16(rng, h.size(), 0.5f);
  auto w = random_f32(rng, size_t(hidden), 1.f, 0.3f);
  DeviceBuffer<bf16> d_h(h), d_delta(delta), d_out(h.size());
  DeviceBuffer<float> d_w(w);
  d_out.poison();
  add_rmsnorm(d_h.get(), d_delta.get(), d_w.get(), d_out.get(), rows, hidden, 1e-6f, nullptr);
  std::vector<bf16> ref_out;
  add_rmsnorm_ref(h, delta, w, ref_out, rows, hidden, 1e-6f);
  const auto ch = compare(d_h.download(), h, 0.0, 0.0);  // one rounding of an exact sum: bit-exact
  EXPECT_TRUE(ch.ok()) << "residual " << ch.describe();
  const auto co = compare(d_out.download(), ref_out, kBf16Rtol, kBf16Atol);
  EXPECT_TRUE(co.ok()) << "norm " << co.describe();
}

}  // namespace
}  // namespace striker::cuda::testing
