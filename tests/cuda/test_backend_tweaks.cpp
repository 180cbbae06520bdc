// The DecodeTweaks variants (decode_tweaks.h) change how decode kernels are scheduled, never what
// they compute: the same steps with every tweak off and every tweak on must give bit-identical
// logits. Steps: a prefill chunk (> 8 tokens, unchanged path), a 5-token chunk and single-token
// decodes (the decode kernels the tweaks switch: split-KV decode attention, router, NVFP4
// GEMV/MoE), then a two-sequence decode batch. The switches come from the table, so a new one is
// covered without editing this test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend_reference.h"
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/backend/decode_tweaks.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

TEST(CudaBackend, DecodeTweaksOffAndOnGiveIdenticalLogits) {
  HostModel hm = make_host_model(small_config());
  const auto off = run_tweak_steps(hm.model, false);
  const auto on = run_tweak_steps(hm.model, true);
  expect_identical_step_logits(off, on);
}

}  // namespace
}  // namespace striker::cuda::testing
