// GPU sampling (backends/cuda/sampling/sampling.cu) against the CPU sampler of the engine, token for
// token: random bf16-rounded logits full of ties, every parameter combination, different
// seeds and steps, batches of rows with different parameters. The one tolerated difference is
// a top_p cut whose cumulative mass lies within 1e-5 (relative) of the target: GPU and CPU sum
// the same doubles in different orders. Such cases are counted and printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <functional>
#include <set>

#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/sampling/sampling.h"
#include "backends/cuda/sampling/sampling_masks.h"
#include "backends/sample_split.h"
#include "backend_reference.h"
#include "cuda_test_util.h"
#include "engine/sampling_cases.h"
#include "sampling_test_util.h"
#include "engine/sampler.h"

namespace striker::cuda::testing {
namespace {

using namespace striker::sampling_cases;  // make_row, random_request, ... (engine/sampling_cases.h)

std::string describe(const SampleRequest& r, int kind) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "kind %d T=%g top_k=%d top_p=%g min_p=%g rep=%g freq=%g pres=%g step=%lld", kind,
                r.temperature, r.top_k, r.top_p, r.min_p, r.repetition_penalty, r.frequency_penalty, r.presence_penalty,
                (long long)r.step);
  return buf;
}

struct Tally {
  int rows = 0, exact = 0, boundary = 0, bad = 0, edit_bad = 0, candidate_rows = 0, race_rows = 0, cut_rows = 0;
  int race_checked = 0, race_bad = 0;  // race- and cut-path draws whose token must be one of the slices' winners
  int cut_checked = 0, cut_bad = 0;    // cut-path rows whose state shows the digit launches settled every cut
};

// One launch: `rows` rows of vocabulary V, each with its own random parameters (`shape`, when
// given, overrides some of them: e.g. the server's generation_config).
void run_batch(std::mt19937& rng, int64_t V, int rows, Tally& t,
               const std::function<void(SampleRequest&, int)>& shape = nullptr) {
  std::vector<float> logits;
  std::vector<int> kinds;
  std::vector<SampleRequest> reqs;
  for (int r = 0; r < rows; ++r) {
    kinds.push_back(int(rng() % 6));
    const auto row = make_row(rng, V, kinds.back());
    logits.insert(logits.end(), row.begin(), row.end());
    reqs.push_back(random_request(rng, V, r));
    if (shape) shape(reqs.back(), r);
    const sample_split::SplitPlan plan = sample_split::split_plan(V);
    const int32_t packed_k = reqs.back().top_k > 0 && reqs.back().top_k < V ? reqs.back().top_k : 0;
    t.candidate_rows += sample_split::uses_candidates(plan, reqs.back().temperature < 1e-5f, packed_k);
    t.race_rows += sample_split::uses_race(plan, reqs.back().temperature < 1e-5f, packed_k, reqs.back().top_p);
    t.cut_rows += sample_split::uses_cuts(plan, reqs.back().temperature < 1e-5f, packed_k, reqs.back().top_p);
  }
  std::shuffle(reqs.begin(), reqs.end(), rng);  // samples need not be in row order
  std::vector<SampleRowParams> params;
  std::vector<LogitEdit> edits;
  pack_samples(reqs, rows, V, params, edits);
  SamplingBuffers sb(rows, std::max<int64_t>(int64_t(edits.size()), 1));
  stage_samples(sb, params, edits);
  DeviceBuffer<float> d_logits(logits);
  STRIKER_CUDA_CHECK(cudaMemset(sb.tokens_dev(), 0xFF, size_t(rows) * 4));  // -1: unwritten shows
  // Poisoned candidate scratch: a slice the first kernel failed to write shows as huge counts
  // and NaN-keyed (0xFFFFFFFF sorts above +inf) garbage candidates.
  const SampleScratch& sc = sb.scratch();
  STRIKER_CUDA_CHECK(cudaMemset(sc.cand_key, 0xFF, size_t(rows) * sample_split::kMaxCandidates * 4));
  STRIKER_CUDA_CHECK(cudaMemset(sc.cand_id, 0xFF, size_t(rows) * sample_split::kMaxCandidates * 4));
  STRIKER_CUDA_CHECK(cudaMemset(sc.cand_n, 0x7F, size_t(rows) * sample_split::kMaxSplits * 4));
  STRIKER_CUDA_CHECK(cudaMemset(sc.slice_max_v, 0xFF, size_t(rows) * sample_split::kMaxSplits * 4));
  STRIKER_CUDA_CHECK(cudaMemset(sc.slice_race_v, 0xFF, size_t(rows) * sample_split::kMaxSplits * 4));
  STRIKER_CUDA_CHECK(cudaMemset(sc.slice_race_id, 0xFF, size_t(rows) * sample_split::kMaxSplits * 4));
  // The cut path's state is poisoned too (its first kernel must start it afresh); its histograms are
  // not: they are zero between steps by contract (allocation, then each digit's last CTA).
  STRIKER_CUDA_CHECK(cudaMemset(sc.cut, 0xFF, size_t(rows) * sizeof(CutState)));
  TokenMaskBuffers masks(rows, V);  // structured-output masks first, as forward_sampled does
  masks.apply(reqs, d_logits.get(), nullptr);
  sb.upload(int(params.size()), int64_t(edits.size()), nullptr);
  apply_logit_edits(d_logits.get(), V, sb.params_dev(), sb.edits_dev(), sb.counts_dev(), int64_t(edits.size()), nullptr);
  sample_rows(d_logits.get(), V, sb.params_dev(), sb.counts_dev(), int(params.size()), sb.scratch(), sb.tokens_dev(), nullptr,
              sample_paths(params, V));  // the launches the backend makes for these rows
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<int32_t> got(static_cast<size_t>(rows));
  STRIKER_CUDA_CHECK(cudaMemcpy(got.data(), sb.tokens_dev(), size_t(rows) * 4, cudaMemcpyDeviceToHost));
  const std::vector<float> edited = d_logits.download();
  std::vector<int32_t> race_ids(size_t(rows) * sample_split::kMaxSplits);
  STRIKER_CUDA_CHECK(cudaMemcpy(race_ids.data(), sc.slice_race_id, race_ids.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<CutState> cut_state(static_cast<size_t>(rows));
  STRIKER_CUDA_CHECK(cudaMemcpy(cut_state.data(), sc.cut, cut_state.size() * sizeof(CutState), cudaMemcpyDeviceToHost));
  std::vector<uint32_t> cut_count(size_t(rows) * 256);
  std::vector<unsigned long long> cut_mass(size_t(rows) * 256);
  STRIKER_CUDA_CHECK(cudaMemcpy(cut_count.data(), sc.cut_count, cut_count.size() * 4, cudaMemcpyDeviceToHost));
  STRIKER_CUDA_CHECK(cudaMemcpy(cut_mass.data(), sc.cut_mass, cut_mass.size() * 8, cudaMemcpyDeviceToHost));
  for (size_t b = 0; b < cut_count.size(); ++b)
    if (cut_count[b] != 0 || cut_mass[b] != 0) {
      ADD_FAILURE() << "cut histogram of sample " << b / 256 << " bin " << b % 256 << " not cleared after the step";
      break;
    }
  const sample_split::SplitPlan plan = sample_split::split_plan(V);

  std::vector<float> scratch, processed;
  for (size_t s = 0; s < reqs.size(); ++s) {
    const SampleRequest& r = reqs[s];
    const std::span<const float> row(logits.data() + size_t(r.row) * size_t(V), size_t(V));
    // The edit kernel must reproduce the CPU's logit processing bit for bit.
    process_logits(row, r, processed);
    for (int64_t i = 0; i < V; ++i) {
      const float a = edited[size_t(r.row) * size_t(V) + size_t(i)], b = processed[size_t(i)];
      if (!(a == b || (a != a && b != b))) {
        if (t.edit_bad++ < 5)
          std::printf("EDIT MISMATCH row %d id %lld: gpu %.9g cpu %.9g (%s)\n", r.row, (long long)i, a, b,
                      describe(r, kinds[size_t(r.row)]).c_str());
        break;
      }
    }
    // A race- or cut-path draw (not greedy, finite row maximum) is the best of its slices' winners,
    // which the race kernel wrote over the poison; on the cut path the row's state must show each
    // cut settled by its digit launches (the last CTA of each digit also resets the arrivals).
    const SampleRowParams& q = params[s];
    const bool cuts = sample_split::uses_cuts(plan, q.greedy != 0, q.top_k, q.top_p);
    if (!q.greedy && (cuts || sample_split::uses_race(plan, false, q.top_k, q.top_p))) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < V; ++i) {
        const float v = edited[size_t(r.row) * size_t(V) + size_t(i)];
        if (v == v && v > m) m = v;
      }
      if (std::isfinite(m)) {
        ++t.race_checked;
        const auto first = race_ids.begin() + std::ptrdiff_t(s) * sample_split::kMaxSplits;
        if (std::find(first, first + plan.splits, got[s]) == first + plan.splits) ++t.race_bad;
        if (cuts) {
          const CutState& cs = cut_state[s];
          ++t.cut_checked;
          const bool top_p_settled = !(q.top_p < 1.0f) ? cs.p_on == 0 : cs.p_on == 1;
          const bool top_k_settled = q.top_k <= 0 ? cs.k_on == 0 : (cs.k_on == 1) != (cs.k_dead == 1);
          if (!top_p_settled || !top_k_settled || cs.arrivals != 0) {
            if (t.cut_bad++ < 5)
              std::printf("CUT STATE row %d: k_on %d k_dead %d p_on %d arrivals %u (%s)\n", r.row, cs.k_on, cs.k_dead,
                          cs.p_on, cs.arrivals, describe(r, kinds[size_t(r.row)]).c_str());
          }
        }
      }
    }
    SampleDiagnostics diag;
    const int32_t want = sample_request(row, r, scratch, &diag);
    ++t.rows;
    if (got[s] == want) {
      ++t.exact;
    } else if (diag.top_p_margin < 1e-5) {
      ++t.boundary;
      std::printf("top_p boundary (margin %.2e): row %d gpu %d cpu %d (%s)\n", diag.top_p_margin, r.row, got[s], want,
                  describe(r, kinds[size_t(r.row)]).c_str());
    } else {
      if (t.bad++ < 10)
        std::printf("TOKEN MISMATCH row %d: gpu %d cpu %d, top_p margin %.2e (%s)\n", r.row, got[s], want,
                    diag.top_p_margin, describe(r, kinds[size_t(r.row)]).c_str());
    }
  }
}

// One path's test: at Flint's vocabulary and an odd one, two launches of 48 rows and one of a single row.
void run_path_batches(std::mt19937& rng, Tally& t, const std::function<void(SampleRequest&, int)>& shape) {
  for (int64_t V : {int64_t(151552), int64_t(4099)}) {
    for (int batch = 0; batch < 2; ++batch) run_batch(rng, V, 48, t, shape);
    run_batch(rng, V, 1, t, shape);
  }
}

void expect_tally(const Tally& t, const char* what) {
  std::printf("%s: %d rows (%d on the candidate path, %d on the race path, %d on the cut path), %d exact, %d top_p-boundary, "
              "%d mismatched, %d edit mismatches\n",
              what, t.rows, t.candidate_rows, t.race_rows, t.cut_rows, t.exact, t.boundary, t.bad, t.edit_bad);
  EXPECT_EQ(t.bad, 0) << what << ": GPU tokens differ from the CPU sampler away from any top_p boundary";
  EXPECT_EQ(t.edit_bad, 0) << what << ": GPU logit edits differ from the CPU's process_logits";
  EXPECT_LE(t.boundary * 100, t.rows) << what << ": too many top_p boundary cases to be rounding";
  EXPECT_EQ(t.race_bad, 0) << what << ": race- or cut-path tokens that are none of their slices' winners";
  EXPECT_EQ(t.cut_bad, 0) << what << ": cut-path rows whose state does not show their cuts settled";
}

TEST(CudaSampling, MatchesCpuSamplerOnFlintVocabulary) {
  std::mt19937 rng(101);
  Tally t;
  for (int batch = 0; batch < 3; ++batch) run_batch(rng, 151552, 64, t);
  expect_tally(t, "vocab 151552");
  EXPECT_GT(t.candidate_rows, 0);
  EXPECT_GT(t.race_rows, 0);
  EXPECT_GT(t.cut_checked, 0);
}

// The cut path (top_p without top_k; a top_k above the candidate path's cap, with and without
// top_p), alone and mixed with the other paths, on every kind of row: the CPU sampler's tokens.
TEST(CudaSampling, CutPathMatchesCpuSampler) {
  std::mt19937 rng(808);
  Tally t;
  const auto shape = [](SampleRequest& r, int i) {
    if (i % 5 == 4) return;  // the random parameters: the other paths in the same launch
    r.temperature = i % 3 == 0 ? 0.7f : 1.f;
    r.top_k = i % 4 == 0 ? 300 + i : (i % 4 == 1 ? 129 : 0);
    r.top_p = i % 4 == 1 ? 1.f : (i % 2 == 0 ? 0.9f : 0.5f);
    if (i % 7 == 0) r.min_p = 0.05f;
  };
  run_path_batches(rng, t, shape);
  expect_tally(t, "cut path");
  EXPECT_GT(t.cut_rows * 2, t.rows) << "most rows should have taken the cut path";
  EXPECT_GT(t.cut_checked * 3, t.rows) << "the cut state should have been checked on most rows";
}

// The race path (no top_k, no top_p: greedy, temperature, min_p), alone and in launches with the
// other two paths, on every kind of row: the CPU sampler's tokens.
TEST(CudaSampling, RacePathMatchesCpuSampler) {
  std::mt19937 rng(707);
  Tally t;
  const auto shape = [](SampleRequest& r, int i) {
    if (i % 4 == 3) return;  // the random parameters: the other paths in the same launch
    r.top_k = i % 3 == 0 ? -1 : 0;
    r.top_p = 1.f;
    if (i % 5 == 0) r.temperature = 0.f;  // greedy
    if (i % 7 == 0) r.min_p = 0.05f;
  };
  run_path_batches(rng, t, shape);
  expect_tally(t, "race path");
  EXPECT_GT(t.race_rows * 2, t.rows) << "most rows should have taken the race path";
  EXPECT_GT(t.race_checked * 3, t.rows) << "the race kernel's winners should have been checked on most rows";
}

// Flint's generation_config (T 1, top_k 20, top_p 0.95: the server's default) on every kind of
// row, with and without min_p and penalties, in launches that mix it with rows of the other
// path (no top_k, a top_k above the candidate path's cap, greedy).
TEST(CudaSampling, GenerationConfigMatchesCpuSamplerInMixedLaunches) {
  std::mt19937 rng(505);
  Tally t;
  const auto shape = [](SampleRequest& r, int i) {
    if (i % 8 == 7) return;  // keep the random parameters: the other paths alongside
    r.temperature = 1.f;
    r.top_k = 20;
    r.top_p = 0.95f;
    if (i % 3 == 0) r.min_p = 0.f;
    if (i % 5 == 0) r.top_k = 129;  // one above the candidate path's cap at this vocabulary
  };
  for (int batch = 0; batch < 2; ++batch) run_batch(rng, 151552, 96, t, shape);
  run_batch(rng, 151552, 1, t, shape);
  expect_tally(t, "generation_config, vocab 151552");
  EXPECT_GT(t.candidate_rows * 2, t.rows) << "most rows should have taken the candidate path";
}

// Structured-output masks (SampleRequest::allowed) in launches that mix masked and unmasked
// rows: a few allowed ids, most ids, three ids; the masked logits and the tokens must equal the
// CPU sampler's (which applies the same bitset in process_logits).
TEST(CudaSampling, GrammarMasksMatchCpuSampler) {
  std::mt19937 rng(606);
  Tally t;
  for (int64_t V : {int64_t(151552), int64_t(4099)}) {
    const int rows = 48;
    std::vector<std::vector<uint32_t>> masks(rows);
    int masked = 0;
    const auto shape = [&](SampleRequest& r, int i) {
      if (i % 4 == 3) return;
      auto& m = masks[size_t(i)];
      m.assign(size_t((V + 31) / 32), 0u);
      auto allow = [&](uint64_t id) { m[size_t(id >> 5)] |= 1u << (id & 31); };
      if (i % 4 == 0) {
        for (int k = 0; k < 50; ++k) allow(rng() % uint64_t(V));
      } else if (i % 4 == 1) {
        for (auto& w : m) w = rng() | rng();
      } else {
        for (int k = 0; k < 3; ++k) allow(rng() % uint64_t(V));
      }
      if (V % 32) m.back() &= (1u << (V % 32)) - 1;
      r.allowed = m.data();
      ++masked;
    };
    run_batch(rng, V, rows, t, shape);
    EXPECT_EQ(masked, rows * 3 / 4);
  }
  expect_tally(t, "grammar masks");
}

TEST(CudaSampling, MatchesCpuSamplerOnManyRowsOfAnOddVocabulary) {
  std::mt19937 rng(202);
  Tally t;
  for (int batch = 0; batch < 4; ++batch) run_batch(rng, 4099, 256, t);
  expect_tally(t, "vocab 4099");
}

// Small enough for compute-sanitizer racecheck/memcheck (--gtest_filter=CudaSampling.Small*).
TEST(CudaSampling, SmallVocabulariesForSanitizers) {
  std::mt19937 rng(303);
  Tally t;
  run_batch(rng, 37, 200, t);  // fewer tokens than threads, top_k above the vocabulary
  run_batch(rng, 1500, 24, t);
  expect_tally(t, "vocab 37 / 1500");
}

TEST(CudaSampling, GreedyIsArgmaxWithLowestIdAndSkipsNaN) {
  const int64_t V = 100003;
  std::mt19937 rng(7);
  std::vector<float> logits;
  for (int r = 0; r < 3; ++r) {
    auto row = make_row(rng, V, 0);
    row[size_t(900 + r)] = row[size_t(5 + r)] = row[size_t(70000 + r)] = 50.f;
    row[0] = std::numeric_limits<float>::quiet_NaN();
    logits.insert(logits.end(), row.begin(), row.end());
  }
  std::vector<float> all_nan(static_cast<size_t>(V), std::numeric_limits<float>::quiet_NaN());
  logits.insert(logits.end(), all_nan.begin(), all_nan.end());
  std::vector<SampleRequest> reqs(4);
  for (int r = 0; r < 4; ++r) {
    reqs[size_t(r)].row = r;
    reqs[size_t(r)].temperature = 0.f;
  }
  reqs[1].top_k = 3;  // cuts do not matter when greedy
  reqs[2].logit_bias = {{5 + 2, -1.f}};  // the biased tie loses: next lowest id wins
  std::vector<SampleRowParams> params;
  std::vector<LogitEdit> edits;
  pack_samples(reqs, 4, V, params, edits);
  SamplingBuffers sb(4, 8);
  stage_samples(sb, params, edits);
  DeviceBuffer<float> d_logits(logits);
  STRIKER_CUDA_CHECK(cudaMemset(sb.tokens_dev(), 0xFF, 16));
  sb.upload(4, int64_t(edits.size()), nullptr);
  apply_logit_edits(d_logits.get(), V, sb.params_dev(), sb.edits_dev(), sb.counts_dev(), int64_t(edits.size()), nullptr);
  sample_rows(d_logits.get(), V, sb.params_dev(), sb.counts_dev(), 4, sb.scratch(), sb.tokens_dev(), nullptr);
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<int32_t> got(4);
  STRIKER_CUDA_CHECK(cudaMemcpy(got.data(), sb.tokens_dev(), 16, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got[0], 5) << "greedy must take the lowest id of the tied maximum";
  EXPECT_EQ(got[1], 6) << "greedy with top_k must still be the plain argmax";
  EXPECT_EQ(got[2], 902) << "a logit_bias on the lowest tied id must hand the tie to the next";
  EXPECT_EQ(got[3], 0) << "an all-NaN row must give token 0 as the CPU sampler does";
  std::vector<float> scratch;
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(got[size_t(r)],
              sample_request({logits.data() + size_t(r) * size_t(V), size_t(V)}, reqs[size_t(r)], scratch))
        << "row " << r;
}

// Not a check: the device time of one sample_rows call at Flint's vocabulary (its launches for these
// rows, back to back on a stream: each launch's host cost is in it too), printed for
// docs/performance.md (the edits kernel is not included: a few thousand threads).
TEST(CudaSampling, PrintsTimingAtFlintSize) {
  const int64_t V = 151552;
  std::mt19937 rng(4);
  std::vector<float> logits;
  for (int r = 0; r < 256; ++r) {
    const auto row = make_row(rng, V, 0);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  DeviceBuffer<float> d_logits(logits);
  struct Config {
    const char* name;
    float t, top_p;
    int32_t top_k;
  };
  for (const Config& cfg : {Config{"greedy", 0.f, 1.f, 0}, Config{"T=1", 1.f, 1.f, 0}, Config{"top_k=50", 1.f, 1.f, 50},
                            Config{"top_p=0.9", 1.f, 0.9f, 0}, Config{"top_p=0.5", 0.7f, 0.5f, 0}, Config{"top_k=50 top_p=0.9", 0.7f, 0.9f, 50},
                            Config{"top_k=20 top_p=0.95", 1.f, 0.95f, 20}, Config{"top_k=128 top_p=0.95", 1.f, 0.95f, 128},
                            Config{"top_k=129 top_p=0.95", 1.f, 0.95f, 129}, Config{"top_k=1000", 1.f, 1.f, 1000}}) {
    for (int rows : {1, 64, 256}) {
      std::vector<SampleRequest> reqs(static_cast<size_t>(rows));
      for (int r = 0; r < rows; ++r) {
        reqs[size_t(r)].row = r;
        reqs[size_t(r)].temperature = cfg.t;
        reqs[size_t(r)].top_p = cfg.top_p;
        reqs[size_t(r)].top_k = cfg.top_k;
        reqs[size_t(r)].seed = uint64_t(r);
      }
      std::vector<SampleRowParams> params;
      std::vector<LogitEdit> edits;
      pack_samples(reqs, rows, V, params, edits);
      SamplingBuffers sb(rows, 1);
      std::copy(params.begin(), params.end(), sb.params_host());
      sb.counts_host()[0] = rows;
      sb.counts_host()[1] = 0;
      sb.upload(rows, 0, nullptr);
      cudaEvent_t a, b;
      STRIKER_CUDA_CHECK(cudaEventCreate(&a));
      STRIKER_CUDA_CHECK(cudaEventCreate(&b));
      const SamplePaths paths = sample_paths(params, V);  // the launches the backend makes for these rows
      sample_rows(d_logits.get(), V, sb.params_dev(), sb.counts_dev(), rows, sb.scratch(), sb.tokens_dev(), nullptr,
                  paths);  // warm-up
      STRIKER_CUDA_CHECK(cudaEventRecord(a));
      for (int it = 0; it < 10; ++it)
        sample_rows(d_logits.get(), V, sb.params_dev(), sb.counts_dev(), rows, sb.scratch(), sb.tokens_dev(), nullptr,
                    paths);
      STRIKER_CUDA_CHECK(cudaEventRecord(b));
      STRIKER_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      STRIKER_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      std::printf("sampling timing: %-20s rows %3d vocab %lld: %8.1f us per launch\n", cfg.name, rows, (long long)V,
                  double(ms) * 100.0);
    }
  }
}

TEST(CudaSampling, PackRejectsBadRowsAndIds) {
  std::vector<SampleRowParams> params;
  std::vector<LogitEdit> edits;
  std::vector<SampleRequest> reqs(1);
  reqs[0].row = 3;
  EXPECT_THROW(pack_samples(reqs, 3, 100, params, edits), Error);  // row outside the step
  reqs[0].row = 0;
  reqs[0].logit_bias = {{100, 1.f}};
  EXPECT_THROW(pack_samples(reqs, 3, 100, params, edits), Error);  // id outside the vocabulary
  reqs[0].logit_bias.clear();
  reqs.push_back(reqs[0]);
  EXPECT_THROW(pack_samples(reqs, 3, 100, params, edits), Error);  // one row sampled twice
}

// Every row is split over slices: a vocabulary too large to split is refused with a clear error, by
// sample_rows and by a backend built to sample on the device (not a silent slow path).
TEST(CudaSampling, RefusesVocabulariesBeyondTheSplit) {
  ASSERT_EQ(sample_split::split_plan(sample_split::kMaxVocab + 1).splits, 0);
  SamplingBuffers sb(1, 1);
  EXPECT_THROW(sample_rows(nullptr, sample_split::kMaxVocab + 1, sb.params_dev(), sb.counts_dev(), 1, sb.scratch(),
                           sb.tokens_dev(), nullptr),
               Error);
  EXPECT_THROW(sample_rows(nullptr, 4099, sb.params_dev(), sb.counts_dev(), 1, SampleScratch{}, sb.tokens_dev(), nullptr),
               Error)
      << "no split scratch";
  FlintConfig c = small_config();
  c.num_hidden_layers = 1;
  c.first_k_dense_replace = 1;
  c.layer_types = {LayerType::Full};
  c.vocab_size = sample_split::kMaxVocab + 1;
  try {
    make_cuda_backend_dummy(c, 3, WeightFormat::bf16, CudaBackendOptions{256, 64, 1 << 16});
    ADD_FAILURE() << "a backend sampling on the device was built for vocabulary " << c.vocab_size;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device sampling"), std::string::npos) << e.what();
  }
}

// The backend end to end: forward_sampled on a small random model returns the CPU sampler's
// tokens for the very logits rows it returns (all rows asked back here).
TEST(CudaSampling, BackendForwardSampledMatchesCpuOnItsOwnLogits) {
  FlintConfig c = small_config();  // backend_reference.h, cut to two layers
  c.num_hidden_layers = 2;
  c.first_k_dense_replace = 1;
  c.layer_types = {LayerType::Sliding, LayerType::Full};
  auto backend = make_cuda_backend_dummy(c, 3, WeightFormat::bf16, CudaBackendOptions{256, 64, 1 << 16});
  ASSERT_TRUE(backend->samples_on_device());
  backend->allocate_kv_cache(KvCacheSpec{16, 16, 16});
  std::mt19937 rng(9);
  ForwardBatch batch;
  for (int s = 0; s < 3; ++s) {
    SequenceChunk ch;
    for (int i = 0; i < 20; ++i) ch.tokens.push_back(int32_t(rng() % uint32_t(c.vocab_size)));
    ch.full_block_table = {s * 2, s * 2 + 1};
    ch.sliding_block_table = {s * 2, s * 2 + 1};
    ch.all_logits = s == 1;  // 20 rows for this one
    batch.seqs.push_back(ch);
  }
  const int rows = 1 + 20 + 1;
  DeviceSampling ds;
  for (int32_t r : {0, 20, 21}) ds.samples.push_back(random_request(rng, c.vocab_size, r));
  ds.samples.push_back(random_request(rng, c.vocab_size, 7));
  for (int32_t r = 0; r < rows; ++r) ds.return_rows.push_back(r);
  SampledStep out;
  backend->forward_sampled(batch, ds, out);
  ASSERT_EQ(out.tokens.size(), ds.samples.size());
  ASSERT_EQ(out.logits.size(), size_t(rows) * size_t(c.vocab_size));
  std::vector<float> scratch;
  int boundary = 0;
  for (size_t s = 0; s < ds.samples.size(); ++s) {
    const SampleRequest& r = ds.samples[s];
    SampleDiagnostics diag;
    const int32_t want =
        sample_request({out.logits.data() + size_t(r.row) * size_t(c.vocab_size), size_t(c.vocab_size)}, r, scratch, &diag);
    if (out.tokens[s] != want && diag.top_p_margin < 1e-5) {
      ++boundary;
      continue;
    }
    EXPECT_EQ(out.tokens[s], want) << "sample " << s << " (row " << r.row << ")";
  }
  EXPECT_LE(boundary, 1);
  // Only the rows asked for come back, and the returned rows are the raw ones: forward() agrees.
  std::vector<float> logits;
  backend->forward(batch, logits);
  ASSERT_EQ(logits.size(), out.logits.size());
  ds.return_rows = {21};
  backend->forward_sampled(batch, ds, out);
  ASSERT_EQ(out.logits.size(), size_t(c.vocab_size));
  const auto cmp = compare(out.logits, std::vector<float>(logits.end() - c.vocab_size, logits.end()), 1e-3, 1e-3);
  EXPECT_TRUE(cmp.ok()) << "returned row differs from forward()'s: " << cmp.describe();
}

// Async scheduling: steps launched one ahead of their collect, each sequence's token taken on the
// device from the previous step's draws (SequenceChunk::token_from_sample), give exactly the
// tokens and logprobs of forward_sampled steps fed the drawn tokens by the host — also when, as the
// engine does for a penalty, the launch's mask wait collects the previous step and only then
// completes a sample's output counts (the backend must read them after the wait).
TEST(CudaSampling, AsyncStepsMatchForwardSampled) {
  FlintConfig c = small_config();
  c.num_hidden_layers = 2;
  c.first_k_dense_replace = 1;
  c.layer_types = {LayerType::Sliding, LayerType::Full};
  std::mt19937 rng(21);
  constexpr int kSeqs = 3, kPrompt = 9, kSteps = 12;
  std::vector<std::vector<int32_t>> prompts(kSeqs);
  for (auto& p : prompts)
    for (int i = 0; i < kPrompt; ++i) p.push_back(int32_t(rng() % uint32_t(c.vocab_size)));
  std::vector<SampleRequest> params;
  for (int s = 0; s < kSeqs; ++s) {
    SampleRequest r = random_request(rng, c.vocab_size, s);
    r.repetition_penalty = 1.0f;
    r.presence_penalty = 0.0f;
    r.frequency_penalty = s == 2 ? 0.8f : 0.0f;  // sequence 2's counts arrive late on the async path
    r.output_counts.clear();
    r.prompt_tokens.clear();
    r.allowed = nullptr;
    r.top_logprobs = s == 1 ? 3 : -1;
    params.push_back(r);
  }
  auto chunk = [&](int s, std::vector<int32_t> tokens, int64_t start) {
    SequenceChunk ch;
    ch.tokens = std::move(tokens);
    ch.start_pos = start;
    ch.full_block_table = {s * 2, s * 2 + 1};
    ch.sliding_block_table = {s * 2, s * 2 + 1};
    return ch;
  };
  auto counts_of = [](const std::vector<int32_t>& drawn) {
    std::map<int32_t, int32_t> m;
    for (int32_t t : drawn) ++m[t];
    return std::vector<std::pair<int32_t, int32_t>>(m.begin(), m.end());
  };
  // Step `step`'s samples; sequence 2's counts from `drawn2` (its tokens drawn before this step).
  auto sampling = [&](int64_t step, const std::vector<int32_t>& drawn2) {
    DeviceSampling ds;
    for (int s = 0; s < kSeqs; ++s) {
      ds.samples.push_back(params[size_t(s)]);
      ds.samples.back().row = s;
      ds.samples.back().step = step;
    }
    ds.samples[2].output_counts = counts_of(drawn2);
    return ds;
  };
  auto host = make_cuda_backend_dummy(c, 3, WeightFormat::bf16, CudaBackendOptions{256, 64, 1 << 16});
  auto async = make_cuda_backend_dummy(c, 3, WeightFormat::bf16, CudaBackendOptions{256, 64, 1 << 16});
  ASSERT_TRUE(async->supports_async_steps());
  for (auto* b : {host.get(), async.get()}) b->allocate_kv_cache(KvCacheSpec{16, 8, 8});
  // Host-fed: each step's tokens (and counts) are the previous steps' draws.
  std::vector<std::vector<int32_t>> want(kSeqs);
  std::vector<std::vector<SampledLogprobs>> want_lp;
  {
    ForwardBatch prefill;
    for (int s = 0; s < kSeqs; ++s) prefill.seqs.push_back(chunk(s, prompts[size_t(s)], 0));
    SampledStep out;
    host->forward_sampled(prefill, sampling(0, {}), out);
    for (int step = 1; step <= kSteps; ++step) {
      for (int s = 0; s < kSeqs; ++s) want[size_t(s)].push_back(out.tokens[size_t(s)]);
      want_lp.push_back(out.logprobs);
      ForwardBatch next;
      for (int s = 0; s < kSeqs; ++s) next.seqs.push_back(chunk(s, {out.tokens[size_t(s)]}, kPrompt + step - 1));
      host->forward_sampled(next, sampling(step, want[2]), out);
    }
  }
  // Launched one ahead: step k + 1 goes out before step k is collected, its tokens stand-ins; its
  // mask wait collects step k, then completes sequence 2's counts (the engine's late counts).
  std::vector<std::vector<int32_t>> got(kSeqs);
  std::vector<std::vector<SampledLogprobs>> got_lp;
  auto take = [&](const SampledStep& out) {
    for (int s = 0; s < kSeqs; ++s) got[size_t(s)].push_back(out.tokens[size_t(s)]);
    got_lp.push_back(out.logprobs);
  };
  ForwardBatch prefill;
  for (int s = 0; s < kSeqs; ++s) prefill.seqs.push_back(chunk(s, prompts[size_t(s)], 0));
  async->launch_sampled(prefill, sampling(0, {}));
  for (int step = 1; step <= kSteps; ++step) {
    ForwardBatch next;
    for (int s = 0; s < kSeqs; ++s) {
      next.seqs.push_back(chunk(s, {0}, kPrompt + step - 1));
      next.seqs.back().token_from_sample = s;
    }
    DeviceSampling ds = sampling(step, got[2]);  // one token short: the uncollected step's
    bool collected = false;
    ds.wait_for_masks = [&] {
      SampledStep out;
      async->collect_sampled(out);
      take(out);
      ds.samples[2].output_counts = counts_of(got[2]);
      collected = true;
    };
    async->launch_sampled(next, ds);
    ASSERT_TRUE(collected) << "the backend did not call wait_for_masks within the launch";
  }
  SampledStep last;
  async->collect_sampled(last);
  EXPECT_EQ(got, want);
  ASSERT_EQ(got_lp.size(), want_lp.size());
  for (size_t k = 0; k < got_lp.size(); ++k) {
    ASSERT_EQ(got_lp[k].size(), 1u);
    ASSERT_EQ(want_lp[k].size(), 1u);
    EXPECT_EQ(got_lp[k][0].logprob, want_lp[k][0].logprob) << "step " << k;
    EXPECT_EQ(got_lp[k][0].top, want_lp[k][0].top) << "step " << k;
  }
  // The contract's checks: a third launch, a token taken with nothing uncollected, rows asked back ahead.
  ForwardBatch one;
  one.seqs.push_back(chunk(0, {0}, kPrompt + kSteps));
  one.seqs.back().token_from_sample = 0;
  EXPECT_THROW(async->launch_sampled(one, sampling(kSteps + 1, {})), Error);
  one.seqs.back().token_from_sample = -1;
  one.seqs.back().tokens = {1};
  DeviceSampling first = sampling(kSteps + 1, {});
  first.samples.resize(1);
  async->launch_sampled(one, first);
  DeviceSampling rows = first;
  rows.return_rows = {0};
  one.seqs.back().start_pos += 1;
  EXPECT_THROW(async->launch_sampled(one, rows), Error);
  async->launch_sampled(one, first);
  EXPECT_THROW(async->launch_sampled(one, first), Error);
  SampledStep drain;
  async->collect_sampled(drain);
  async->collect_sampled(drain);
  EXPECT_THROW(async->collect_sampled(drain), Error);
}

}  // namespace
}  // namespace striker::cuda::testing
