// Timing and table rows shared by the kernel benchmarks (bench_kernels.cpp and bench_<family>.cpp):
// one row per kernel, | kernel | check | µs | GB/s | fraction of the H200 copy roofline |.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace striker::cuda::testing {

// Median over 7 samples of (time of 20 back-to-back launches)/20, in microseconds.
double time_us(const std::function<void(int)>& launch);

// Prints one table row; a failed check (c not null and not ok) counts in kernel_check_failures().
void row(const std::string& name, const Comparison* c, double us, double bytes, const std::string& extra = "");
// A failed check reported outside row() (an extra comparison in a row's notes).
void count_kernel_check_failure();
// Checks that failed so far.
int kernel_check_failures();

// Weight copies to rotate over so one pass reads >= 256 MiB (timings are not L2 hits).
int copies_for(double bytes);
// Each value rounded to bf16 (kept as float).
std::vector<float> rounded(const std::vector<float>& v);

}  // namespace striker::cuda::testing
