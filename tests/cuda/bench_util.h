// Timing and table rows shared by the kernel benchmarks (bench_kernels.cpp and bench_<family>.cpp):
// one row per kernel, | kernel | check | µs | GB/s | fraction of the H200 copy roofline |.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace striker::cuda::testing {

// The stream every benchmark launches on (created once; a graph can be captured from it).
cudaStream_t bench_stream();

// Median over 7 replays of a graph of 20 launches (launch(0..19) captured from bench_stream(), with
// programmatic dependent launch as in a decode step), divided by 20, in microseconds: the device
// time of one launch in a replayed step, without the host's 4-5 µs per stream launch
// (shared/reference/performance.md §10). Launches that cannot be captured fall back to stream
// launches, and the row says so (time_was_graphed()).
double time_us(const std::function<void(int)>& launch);
bool time_was_graphed();

// Prints one table row; a failed check (c not null and not ok) counts in kernel_check_failures().
void row(const std::string& name, const Comparison* c, double us, double bytes, const std::string& extra = "");
// A failed check reported outside row() (an extra comparison in a row's notes).
void count_kernel_check_failure();
// Checks that failed so far.
int kernel_check_failures();

// compare(got, ref) that also fails on any NaN/Inf in `got`, even where `ref` has one too (compare()
// accepts a NaN that the reference expects; between two kernels, a row both left unwritten must fail).
Comparison compare_finite(const std::vector<bf16>& got, const std::vector<bf16>& ref, double rtol, double atol_rel);

// "N TFLOP/s (f of 774)": FLOP rate of `flops` in `us`, and its fraction of the H200's measured
// dense bf16 peak (774 TFLOP/s, docs/performance.md).
std::string tflops_note(double flops, double us);

// A row for a launch that updates the residual h: uploads h0 into d_h, runs launch(0), compares the
// first want.size() values of h with want (2x bf16 tolerance), then times launch; `extra(us)`
// fills the notes column.
void row_checked_h(const std::string& name, const std::function<void(int)>& launch, DeviceBuffer<bf16>& d_h,
                   const std::vector<bf16>& h0, const std::vector<bf16>& want, double bytes,
                   const std::function<std::string(double)>& extra);

// Weight copies to rotate over so one pass reads >= 256 MiB (timings are not L2 hits).
int copies_for(double bytes);

}  // namespace striker::cuda::testing
