// The wgmma prefill kernel's two operand paths alone (wgmma_probe.cu), on small integers so the
// products are exact: S = A·Kᵀ with K through the K-major descriptors, O = P·V with V through the
// N-major ones. A failure here localises a CudaPrefillAttention failure of the wgmma kernel.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "wgmma_probe.h"

namespace striker::cuda::testing {
namespace {

// Wrong elements of 64×128 (the first few reported when `report`).
int probe_errors(WgmmaProbe mode, bool report) {
  const bool values = mode == WgmmaProbe::kValues || mode == WgmmaProbe::kValuesSwappedOffsets;
  std::mt19937 rng(values ? 3 : 2);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<float> a(64 * 128), b(128 * 128);
  for (auto& x : a) x = float(small(rng));
  for (auto& x : b) x = float(small(rng));
  std::vector<bf16> ab(a.size()), bb(b.size());
  for (size_t i = 0; i < a.size(); ++i) ab[i] = float_to_bf16(a[i]);
  for (size_t i = 0; i < b.size(); ++i) bb[i] = float_to_bf16(b[i]);
  DeviceBuffer<bf16> da(ab), db(bb);
  DeviceBuffer<float> dout(64 * 128);
  dout.poison();
  wgmma_probe(da.get(), db.get(), mode, dout.get());
  const std::vector<float> got = dout.download();
  int wrong = 0;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 128; ++c) {
      float want = 0;
      for (int k = 0; k < 128; ++k)
        want += a[size_t(r) * 128 + size_t(k)] * (values ? b[size_t(k) * 128 + size_t(c)] : b[size_t(c) * 128 + size_t(k)]);
      if (got[size_t(r) * 128 + size_t(c)] != want && ++wrong <= 5 && report)
        ADD_FAILURE() << (values ? "O = P·V" : "S = Q·Kᵀ") << " row " << r << " col " << c << ": got "
                      << got[size_t(r) * 128 + size_t(c)] << ", want " << want;
    }
  return wrong;
}

TEST(CudaWgmmaProbe, ScoresThroughKMajorDescriptors) {
  const int wrong = probe_errors(WgmmaProbe::kScores, true);
  EXPECT_EQ(wrong, 0) << "wrong elements of 64×128";
  if (wrong > 0)  // register A fragments or the K descriptor?
    ADD_FAILURE() << "with A from shared memory (SS form, K-major descriptor) instead of registers: "
                  << probe_errors(WgmmaProbe::kScoresSmemA, false) << " wrong elements";
}

TEST(CudaWgmmaProbe, ValuesThroughNMajorDescriptors) {
  const int wrong = probe_errors(WgmmaProbe::kValues, true);
  EXPECT_EQ(wrong, 0) << "wrong elements of 64×128";
  if (wrong > 0)  // which way round the leading/stride offsets would have been right
    ADD_FAILURE() << "with the V descriptor's leading and stride byte offsets exchanged: "
                  << probe_errors(WgmmaProbe::kValuesSwappedOffsets, false) << " wrong elements";
}

}  // namespace
}  // namespace striker::cuda::testing
