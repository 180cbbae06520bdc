// TEMPORARY (one A/B run on the H200, then deleted with the losing variants): STRIKER_AB_OFF is a
// comma-separated list of this session's decode changes to turn off — norm (the next layer's norm
// in the MoE down kernel's last CTA), router (tokens split over several clusters), oproj (all of
// the skinny o_proj's weights before its wait), down (BF16 per-slot down at 2 CTAs per SM),
// shearly (the BF16 down kernel's shared-expert rows before its wait); and rtok1 turns a variant
// on: the router with 1 token per cluster instead of 2.
// docs/performance.md, seventh session.
#pragma once
#include <cstdlib>
#include <cstring>

namespace striker::cuda {

inline bool ab_off(const char* piece) {
  const char* v = std::getenv("STRIKER_AB_OFF");
  return v != nullptr && (std::strstr(v, piece) != nullptr || std::strcmp(v, "all") == 0);
}

}  // namespace striker::cuda
