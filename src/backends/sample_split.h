// How the GPU sampler splits one vocabulary row over several CTAs (src/backends/cuda/sampling/sampling.cu and sampling_cut.cu),
// on one of three paths: rows with a small top_k (the "candidate" path), rows without a top_k or
// top_p cut (the "race" path), and the rest (the "cut" path: top_p without top_k, or a top_k above
// the candidate cap). Header-only and host-usable so the CPU mirror test
// (tests/cpp/engine/test_sampler_gpu_mirror.cpp) replays the very same split.
//
// Why a split: one CTA per row reads 151552 floats several times; with top_k set, each of
// `splits` CTAs keeps a superset of its slice's top_k (at most `cap` tokens), and the union of
// those holds the row's top_k, so one CTA finishes the draw on at most splits * cap tokens.
// The cut path runs the radix selects of the cuts over all slices at once, one launch per digit.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/sample_math.h"  // STRIKER_HD

namespace striker::sample_split {

constexpr int kMaxCandidates = 4096;  // splits * cap: candidate slots per row (shared memory)
constexpr int kMaxSplits = 64;        // scratch is sized for this many slices per row
constexpr int kMaxSlice = 8192;       // tokens per slice (one CTA's shared memory of keys)
constexpr int kTargetSlice = 2048;    // fewer, larger slices when the vocabulary is small
constexpr int kMaxSplitsWanted = 32;  // ~ a quarter of the H200's SMs for one row
constexpr int kMaxCap = 256;          // largest candidate count per slice (finish arrays)
constexpr int kSliceThreads = 512;    // threads of a slice's CTA; thread t reads t, t+512, ...

struct SplitPlan {
  int32_t splits = 0;  // 0: the vocabulary is too large to split (device sampling refuses it)
  int32_t slice = 0;   // tokens per slice; the last one may be shorter (or empty)
  int32_t cap = 0;     // candidate slots per slice = the largest top_k on this path
};

inline SplitPlan split_plan(int64_t vocab) {
  if (vocab <= 0) return {};
  int64_t s = std::clamp<int64_t>((vocab + kTargetSlice - 1) / kTargetSlice, 1, kMaxSplitsWanted);
  if ((vocab + s - 1) / s > kMaxSlice) s = (vocab + kMaxSlice - 1) / kMaxSlice;
  if (s > kMaxSplits) return {};
  SplitPlan p;
  p.splits = int32_t(s);
  p.slice = int32_t((vocab + s - 1) / s);
  p.cap = int32_t(std::min<int64_t>(kMaxCap, kMaxCandidates / s));
  return p;
}

// Whether a packed row (the kernels and the mirror test use this one predicate) (greedy flag, top_k with 0 = off) takes the candidate path.
STRIKER_HD bool uses_candidates(const SplitPlan& plan, bool greedy, int32_t top_k) {
  return plan.splits > 0 && !greedy && top_k > 0 && top_k <= plan.cap;
}

// Whether a packed row takes the race path: no top_k and no top_p cut (greedy, or temperature and
// min_p only). Its slices find the row maximum, then each slice's race winner (a pure function of
// the token and the row maximum), and one CTA takes the best: the winner over the whole row.
STRIKER_HD bool uses_race(const SplitPlan& plan, bool greedy, int32_t top_k, float top_p) {
  return plan.splits > 0 && (greedy || (top_k <= 0 && !(top_p < 1.0f)));
}

// Whether a packed row takes the cut path: every row on neither of the two paths above.
STRIKER_HD bool uses_cuts(const SplitPlan& plan, bool greedy, int32_t top_k, float top_p) {
  return plan.splits > 0 && !uses_candidates(plan, greedy, top_k) && !uses_race(plan, greedy, top_k, top_p);
}

// The largest vocabulary device sampling can split.
constexpr int64_t kMaxVocab = int64_t(kMaxSplits) * kMaxSlice;

}  // namespace striker::sample_split
