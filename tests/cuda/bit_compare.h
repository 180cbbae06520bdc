// Bit-exact comparison of two kernel outputs (a variant against the kernel it must reproduce):
// a one-line reason names the first differing element; NaN in either output fails (outputs are
// NaN-poisoned before the launch, so an element left unwritten shows).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/bf16.h"

namespace striker::cuda::testing {

inline float bits_value(float v) { return v; }
inline float bits_value(bf16 v) { return bf16_to_float(v); }
inline float bits_value(int32_t v) { return float(v); }

// Empty when identical; otherwise "<what>: N of M elements differ, first at i: got G, want W".
template <typename T>
std::string bit_mismatch(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  if (got.size() != want.size())
    return what + ": size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool nan = std::isnan(bits_value(got[i])) || std::isnan(bits_value(want[i]));
    if (nan || std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return {};
  return what + ": " + std::to_string(bad) + " of " + std::to_string(got.size()) + " elements differ (or NaN), first at " +
         std::to_string(first) + ": got " + std::to_string(bits_value(got[first])) + ", want " +
         std::to_string(bits_value(want[first]));
}

}  // namespace striker::cuda::testing
