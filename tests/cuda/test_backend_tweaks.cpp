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
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/decode_tweaks.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

std::vector<std::vector<float>> run_steps(const LoadedModel& model, bool tweaks_on) {
  CudaBackendOptions opt{64, 8, 1024};
  for (const DecodeTweakEntry& e : kDecodeTweaks)
    if (e.name != nullptr) EXPECT_TRUE(set_decode_tweak(opt.tweaks, e.name, tweaks_on)) << e.name;
  auto backend = make_cuda_backend(model, opt);
  backend->allocate_kv_cache(KvCacheSpec{16, 8, 8});
  const int64_t V = model.config.vocab_size;
  std::vector<int32_t> a(40), b(16);
  for (size_t i = 0; i < a.size(); ++i) a[i] = int32_t((i * 7919 + 13) % size_t(V));
  for (size_t i = 0; i < b.size(); ++i) b[i] = int32_t((i * 104729 + 5) % size_t(V));
  // Sequence a owns blocks 0..2 of both pools, b owns blocks 4..5.
  auto chunk = [&](const std::vector<int32_t>& toks, int start, int len, int32_t base, bool all) {
    SequenceChunk c;
    c.tokens.assign(toks.begin() + start, toks.begin() + start + len);
    c.start_pos = start;
    c.all_logits = all;
    for (int blk = 0; blk <= (start + len - 1) / 16; ++blk) {
      c.full_block_table.push_back(base + blk);
      c.sliding_block_table.push_back(base + blk);
    }
    return c;
  };
  std::vector<std::vector<float>> out;
  auto step = [&](std::vector<SequenceChunk> seqs) {
    ForwardBatch batch;
    batch.seqs = std::move(seqs);
    std::vector<float> logits;
    backend->forward(batch, logits);
    out.push_back(std::move(logits));
  };
  step({chunk(a, 0, 20, 0, false)});  // prefill (cuBLASLt path; unchanged by the tweaks)
  step({chunk(a, 20, 5, 0, true)});   // 5 tokens: the 8-token GEMV kernels
  for (int p = 25; p < 33; ++p) step({chunk(a, p, 1, 0, false)});
  step({chunk(b, 0, 10, 4, false)});
  for (int p = 33; p < 36; ++p) step({chunk(a, p, 1, 0, false), chunk(b, p - 23, 1, 4, false)});  // T = 2
  return out;
}

TEST(CudaBackend, DecodeTweaksOffAndOnGiveIdenticalLogits) {
  HostModel hm = make_host_model(small_config());
  const auto off = run_steps(hm.model, false);
  const auto on = run_steps(hm.model, true);
  expect_identical_step_logits(off, on);
}

}  // namespace
}  // namespace striker::cuda::testing
