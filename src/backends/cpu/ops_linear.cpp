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
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t u = uint32_t(p[i]) << 16;  // written out so the loop vectorises
        std::memcpy(out + i, &u, 4);
      }
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

namespace {

// The 32-byte vectors below never cross a non-inlined call boundary of another translation
// unit, so GCC's note that their ABI differs with and without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v8f __attribute__((vector_size(32)));
typedef uint16_t v8h __attribute__((vector_size(16)));
typedef uint32_t v8u __attribute__((vector_size(32)));

// Eight fp32 lanes of a weight row, whatever its storage; conversion is exact.
struct F32Lanes {
  const float* p;
  v8f load(int64_t i) const {
    v8f v;
    std::memcpy(&v, p + i, 32);
    return v;
  }
  float at(int64_t i) const { return p[i]; }
};

struct Bf16Lanes {
  const uint16_t* p;
  v8f load(int64_t i) const {
    v8h h;
    std::memcpy(&h, p + i, 16);
    const v8u u = __builtin_convertvector(h, v8u) << 16;
    v8f v;
    std::memcpy(&v, &u, 32);
    return v;
  }
  float at(int64_t i) const { return bf16_to_float(bf16{p[i]}); }
};

// Sixteen independent partial sums (two GCC vectors) let the compiler use SIMD without
// -ffast-math. The order is a fixed function of n and the same for every storage type, so
// a row gives bit-identical results whether it is read converted or in place.
template <class Lanes>
float dot_lanes(const float* a, Lanes b, int64_t n) {
  v8f acc0 = {}, acc1 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v8f a0, a1;
    std::memcpy(&a0, a + i, 32);
    std::memcpy(&a1, a + i + 8, 32);
    acc0 += a0 * b.load(i);
    acc1 += a1 * b.load(i + 8);
  }
  const v8f acc = acc0 + acc1;
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b.at(i);
  return s;
}

}  // namespace

float dot(const float* a, const float* b, int64_t n) { return dot_lanes(a, F32Lanes{b}, n); }

float dot_bf16(const float* a, const uint16_t* b, int64_t n) { return dot_lanes(a, Bf16Lanes{b}, n); }

void matmul(ThreadPool& pool, const Mat& x, const WeightView& w, Mat& out, bool round_to_bf16) {
  const int64_t rows_out = w.rows(), cols = w.cols(), tokens = x.rows;
  if (x.cols != cols)
    throw Error("CPU backend: internal shape mismatch multiplying by '" + w.name + "'");
  if (out.rows != tokens || out.cols != rows_out) out = Mat(tokens, rows_out);
  if (tokens == 0) return;
  // Enough rows per range to amortise the hand-out, few enough to balance the threads; a
  // small product (an expert during decode) runs on this thread: waking workers costs more.
  const bool small = rows_out * cols * tokens < (int64_t(1) << 17);
  const int64_t grain =
      small ? rows_out : std::max<int64_t>(1, std::min<int64_t>(256, rows_out / (8 * pool.size())));
  pool.parallel_for(rows_out, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> wrow(static_cast<size_t>(cols));
    for (int64_t o = begin; o < end; ++o) {
      if (w.dtype == DType::BF16 && tokens < 4) {  // decode: read the row in place, one pass
        const auto* row = reinterpret_cast<const uint16_t*>(w.data) + o * cols;
        for (int64_t t = 0; t < tokens; ++t) {
          const float v = dot_bf16(x.row(t), row, cols);
          out.data[size_t(t * rows_out + o)] = round_to_bf16 ? round_bf16(v) : v;
        }
        continue;
      }
      load_row(w, o, wrow.data());
      for (int64_t t = 0; t < tokens; ++t) {
        float v = dot(x.row(t), wrow.data(), cols);
        out.data[size_t(t * rows_out + o)] = round_to_bf16 ? round_bf16(v) : v;
      }
    }
  });
}

}  // namespace striker::cpu
