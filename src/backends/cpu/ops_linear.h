// mm(x, W) of FLINT.md §4: out[t, o] = Σ_i x[t, i]·W[o, i] accumulated in fp32, over BF16, F16
// or F32 weights read in place. Parallel over output rows.
#pragma once
#include <cstdint>

#include "backends/cpu/tensor.h"
#include "core/thread_pool.h"
#include "model/weights.h"

namespace striker::cpu {

// Throws striker::Error unless `w` is a 2-D [rows, cols] matrix of a dtype mm can read.
void check_matrix(const WeightView& w, int64_t rows, int64_t cols);

// Reads row `r` of a 2-D weight (BF16/F16/F32) as fp32 into out[0 .. cols).
void load_row(const WeightView& w, int64_t r, float* out);

// Reads a 1-D weight (BF16/F16/F32) of `n` elements as fp32.
std::vector<float> load_vector(const WeightView& w, int64_t n);

// fp32 dot product; the summation order is fixed for a given n (results do not depend on
// which thread or batch computes them).
float dot(const float* a, const float* b, int64_t n);
// The same with b in bf16 bits; gives exactly dot(a, float(b), n).
float dot_bf16(const float* a, const uint16_t* b, int64_t n);

// out = mm(x, W) for every row of x, optionally rounded to bf16. Only output rows
// [0, w.rows()) are computed; out is resized to [x.rows, w.rows()].
void matmul(ThreadPool& pool, const Mat& x, const WeightView& w, Mat& out, bool round_to_bf16);

}  // namespace striker::cpu
