#include "backends/cpu/ops_linear.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/bf16.h"
#include "core/error.h"

namespace striker::cpu {

namespace {

bool readable(DType t) { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }

void convert(const WeightView& w, int64_t offset, int64_t n, float* out) {
  switch (w.dtype) {
    case DType::BF16: {
      const auto* p = reinterpret_cast<const uint16_t*>(w.data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(bf16{p[i]});
      return;
    }
    case DType::F16: {
      const auto* p = reinterpret_cast<const uint16_t*>(w.data) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_float(p[i]);
      return;
    }
    case DType::F32:
      std::memcpy(out, reinterpret_cast<const float*>(w.data) + offset, size_t(n) * 4);
      return;
    default:
      throw Error("CPU backend: tensor '" + w.name + "' has dtype " + std::string(dtype_name(w.dtype)) +
                  ", which the CPU backend cannot read (BF16, F16 or F32 only)");
  }
}

}  // namespace

void check_matrix(const WeightView& w, int64_t rows, int64_t cols) {
  if (w.empty()) throw Error("CPU backend: tensor '" + w.name + "' is missing");
  if (!readable(w.dtype))
    throw Error("CPU backend: tensor '" + w.name + "' has dtype " + std::string(dtype_name(w.dtype)) +
                ", which the CPU backend cannot compute with (BF16, F16 or F32 only)");
  if (w.shape.size() != 2 || w.shape[0] != rows || w.shape[1] != cols)
    throw Error("CPU backend: tensor '" + w.name + "' should have shape [" + std::to_string(rows) + ", " +
                std::to_string(cols) + "]");
  if (w.nbytes < size_t(rows * cols) * dtype_size(w.dtype))
    throw Error("CPU backend: tensor '" + w.name + "' holds fewer bytes than its shape needs");
}

void load_row(const WeightView& w, int64_t r, float* out) { convert(w, r * w.cols(), w.cols(), out); }

std::vector<float> load_vector(const WeightView& w, int64_t n) {
  if (w.empty()) throw Error("CPU backend: tensor '" + w.name + "' is missing");
  if (!readable(w.dtype))
    throw Error("CPU backend: tensor '" + w.name + "' has dtype " + std::string(dtype_name(w.dtype)) +
                ", expected BF16, F16 or F32");
  if (w.numel() != n || w.nbytes < size_t(n) * dtype_size(w.dtype))
    throw Error("CPU backend: tensor '" + w.name + "' should have " + std::to_string(n) + " elements");
  std::vector<float> out(static_cast<size_t>(n));
  convert(w, 0, n, out.data());
  return out;
}

float dot(const float* a, const float* b, int64_t n) {
  // Eight independent partial sums (a GCC vector) let the compiler use SIMD without
  // -ffast-math; the order is a fixed function of n, so results are reproducible.
  typedef float v8 __attribute__((vector_size(32)));
  v8 acc0 = {}, acc1 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v8 a0, b0, a1, b1;
    std::memcpy(&a0, a + i, 32);
    std::memcpy(&b0, b + i, 32);
    std::memcpy(&a1, a + i + 8, 32);
    std::memcpy(&b1, b + i + 8, 32);
    acc0 += a0 * b0;
    acc1 += a1 * b1;
  }
  v8 acc = acc0 + acc1;
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void matmul(ThreadPool& pool, const Mat& x, const WeightView& w, Mat& out, bool round_to_bf16) {
  const int64_t rows_out = w.rows(), cols = w.cols(), tokens = x.rows;
  if (x.cols != cols)
    throw Error("CPU backend: internal shape mismatch multiplying by '" + w.name + "'");
  if (out.rows != tokens || out.cols != rows_out) out = Mat(tokens, rows_out);
  if (tokens == 0) return;
  // Enough rows per range to amortise the hand-out, few enough to balance the threads.
  const int64_t grain = std::max<int64_t>(1, std::min<int64_t>(256, rows_out / (8 * pool.size())));
  pool.parallel_for(rows_out, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> wrow(static_cast<size_t>(cols));
    for (int64_t o = begin; o < end; ++o) {
      load_row(w, o, wrow.data());
      for (int64_t t = 0; t < tokens; ++t) {
        float v = dot(x.row(t), wrow.data(), cols);
        out.data[size_t(t * rows_out + o)] = round_to_bf16 ? round_bf16(v) : v;
      }
    }
  });
}

}  // namespace striker::cpu
