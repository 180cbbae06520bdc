// What the `bench` subcommands share: the roofline they quote and the median they report.
#pragma once
#include <algorithm>
#include <vector>

namespace striker::cli {

// bytes/s: the H200's measured streaming read (reference/performance.md §10), every bench's roofline.
inline constexpr double kReadBandwidth = 4.6e12;

// The upper median (0 for no samples).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace striker::cli
