// Decode projections of 1..8 tokens at Flint's shapes (QKV, o_proj + residual, dense gate/up +
// SwiGLU, LM head), BF16 and NVFP4 (tensor-core skinny kernels from 2 tokens on, the CUDA-core
// ones at 1), checked against one CPU reference per token count. Rows: µs per launch in a
// replayed graph and the fraction of 4.6 TB/s of the weight bytes.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "bench_kernels.h"
#include "bench_util.h"

namespace striker::cuda::testing {
namespace {

enum class Out { Store, Residual, Logits, Act };

struct DecodeShape {
  const char* name;
  int in, rows;  // reduction width; output rows (inter for gate/up)
  Out out;
};

constexpr DecodeShape kShapes[] = {
    {"qkv 5120x2048", 2048, 5120, Out::Store},
    {"o_proj 2048x4096 +h", 4096, 2048, Out::Residual},
    {"dense gate/up 2x8192x2048", 2048, 8192, Out::Act},
    {"lm_head 151552x2048", 2048, 151552, Out::Logits},
};

// One format's kernels behind one signature: run(T, copy, x, out) launches on
// bench_stream(); reference(x, T) is the CPU result (rounded as the output is stored; for the
// residual mode bf16(mm), which the driver adds to h).
struct Format {
  const char* tag;
  double weight_bytes;  // per matrix
  int copies;
  // norm: x is h, normalised inside the one-token kernel (Store, Logits, Act).
  std::function<void(int, int, const bf16*, void*, const InputNorm*)> run;
  std::function<std::vector<float>(const std::vector<bf16>&, int)> reference;
  bool logits_norm = true;  // the LM head takes the norm inside (BF16 only)
};

void bench_shape(std::mt19937& rng, const DecodeShape& s, const Format& f, const std::vector<int>& tokens) {
  const int matrices = s.out == Out::Act ? 2 : 1;
  for (int T : tokens) {
    const auto x = random_bf16(rng, size_t(T) * s.in);
    const auto ref = f.reference(x, T);
    const size_t n = size_t(T) * s.rows;
    const auto h0 = random_bf16(rng, n);
    std::vector<float> want = ref;
    if (s.out == Out::Residual)
      for (size_t i = 0; i < n; ++i) want[i] = round_bf16(bf16_to_float(h0[i]) + ref[i]);
    DeviceBuffer<bf16> d_x(x), d_y(n);
    DeviceBuffer<float> d_l(n);
    void* out = s.out == Out::Logits ? static_cast<void*>(d_l.get()) : static_cast<void*>(d_y.get());
    if (s.out == Out::Residual) d_y.upload(h0);
    else d_y.poison();
    d_l.poison();
    f.run(T, 0, d_x.get(), out, nullptr);
    const auto got = s.out == Out::Logits ? d_l.download() : to_float(d_y.download());
    const auto c = compare(got, want, s.out == Out::Act ? 2 * kBf16Rtol : kBf16Rtol, 1e-3);
    auto launch = [&](int i) { f.run(T, i % f.copies, d_x.get(), out, nullptr); };
    const std::string name = std::string(f.tag) + s.name + " T=" + std::to_string(T) +
                             (T > 1 ? " tensor" : " cuda-core");
    row(name, &c, time_us(launch), f.weight_bytes * matrices);
  }
}

// One token with x = rmsnorm(h) in front: the rmsnorm kernel, then the kernel (two launches), against
// the kernel that normalises h itself (one launch); the second must give the first's bits.
void bench_norm_pair(std::mt19937& rng, const DecodeShape& s, const Format& f) {
  if (s.out == Out::Residual || (s.out == Out::Logits && !f.logits_norm)) return;
  const int matrices = s.out == Out::Act ? 2 : 1;
  const auto h = random_bf16(rng, size_t(s.in), 3.f);
  const auto gamma = random_f32(rng, size_t(s.in), 1.f, 0.3f);
  DeviceBuffer<bf16> d_h(h), d_x(size_t(s.in)), d_y(size_t(s.rows)), d_y2(size_t(s.rows));
  DeviceBuffer<float> d_g(gamma), d_l(size_t(s.rows)), d_l2(size_t(s.rows));
  const bool logits = s.out == Out::Logits;
  void* out = logits ? static_cast<void*>(d_l.get()) : static_cast<void*>(d_y.get());
  void* out2 = logits ? static_cast<void*>(d_l2.get()) : static_cast<void*>(d_y2.get());
  const InputNorm norm{d_g.get(), 1e-6f};
  auto separate = [&](int i) {
    rmsnorm(d_h.get(), d_g.get(), d_x.get(), 1, s.in, 1e-6f, bench_stream());
    f.run(1, i % f.copies, d_x.get(), out, nullptr);
  };
  auto inside = [&](int i) { f.run(1, i % f.copies, d_h.get(), out2, &norm); };
  d_y.poison(), d_y2.poison(), d_l.poison(), d_l2.poison();
  separate(0);
  inside(0);
  const auto a = logits ? d_l.download() : to_float(d_y.download());
  const auto b = logits ? d_l2.download() : to_float(d_y2.download());
  Comparison exact = compare(b, a, 0.0, 0.0);  // bit for bit (any difference fails)
  if (exact.nan_count == 0)
    for (float v : b)
      if (!std::isfinite(v)) ++exact.nan_count;
  const std::string base = std::string(f.tag) + s.name + " T=1";
  row(base + " rmsnorm + kernel", nullptr, time_us(separate), f.weight_bytes * matrices);
  row(base + " norm inside", &exact, time_us(inside), f.weight_bytes * matrices);
}

}  // namespace

void bench_decode_bf16(std::mt19937& rng, const std::vector<int>& tokens, bool norm_pairs) {
  for (const DecodeShape& s : kShapes) {
    const int matrices = s.out == Out::Act ? 2 : 1;
    const size_t elems = size_t(s.rows) * s.in;
    const double bytes = double(elems) * 2;
    const auto W = random_bf16(rng, elems * matrices, 0.05f);  // gate|up stacked for gate/up
    const std::vector<bf16> Wg(W.begin(), W.begin() + elems), Wu(matrices == 2 ? W.begin() + elems : W.end(), W.end());
    Format f{"", bytes, copies_for(bytes * matrices), nullptr, nullptr};
    std::vector<DeviceBuffer<bf16>> ws;
    for (int i = 0; i < f.copies; ++i) ws.emplace_back(W);
    f.run = [&](int T, int i, const bf16* x, void* out, const InputNorm* norm) {
      const bf16* w = ws[size_t(i)].get();
      auto* y = static_cast<bf16*>(out);
      switch (s.out) {
        case Out::Store: gemv_bf16(x, T, s.in, w, s.rows, y, bench_stream(), norm); break;
        case Out::Residual: gemv_residual(x, T, s.in, w, s.rows, y, bench_stream()); break;
        case Out::Logits: gemv_logits(x, T, s.in, w, s.rows, static_cast<float*>(out), bench_stream(), norm); break;
        case Out::Act: gemv_gate_up(x, T, s.in, w, w + elems, s.rows, y, bench_stream(), norm); break;
      }
    };
    f.reference = [&](const std::vector<bf16>& x, int T) {
      if (s.out == Out::Act) {
        std::vector<bf16> act;
        gate_up_ref(x, T, s.in, Wg, Wu, s.rows, act);
        return to_float(act);
      }
      std::vector<float> dot;
      gemv_ref(x, T, s.in, Wg, s.rows, dot);
      return rounded(dot);
    };
    if (norm_pairs) bench_norm_pair(rng, s, f);
    else bench_shape(rng, s, f, tokens);
  }
}

void bench_decode_nvfp4(std::mt19937& rng, const std::vector<int>& tokens, bool norm_pairs) {
  for (const DecodeShape& s : kShapes) {
    const int matrices = s.out == Out::Act ? 2 : 1;
    const double bytes = double(s.rows) * s.in * (0.5 + 1.0 / 16);  // codes + scale bytes
    std::vector<Nvfp4HostMatrix> host;
    for (int m = 0; m < matrices; ++m) host.push_back(random_nvfp4(rng, s.rows, s.in));
    const RowScale2 s2{s.rows / 3, s.rows / 2, {0.0137f, 0.0021f, 0.0433f}};  // q|k|v-like ranges
    const float s2g = 0.011f, s2u = 0.0047f;
    Format f{"nvfp4 ", bytes, copies_for(bytes * matrices), nullptr, nullptr, false};
    std::vector<DeviceBuffer<uint8_t>> codes, scales;  // copy i, matrix m at [i * matrices + m]
    for (int i = 0; i < f.copies; ++i)
      for (const auto& h : host) codes.emplace_back(h.codes), scales.emplace_back(h.scales);
    auto mat = [&](int i, int m) {
      const size_t k = size_t(i) * matrices + size_t(m);
      return Nvfp4Matrix{codes[k].get(), scales[k].get()};
    };
    f.run = [&](int T, int i, const bf16* x, void* out, const InputNorm* norm) {
      auto* y = static_cast<bf16*>(out);
      switch (s.out) {
        case Out::Store: nvfp4_gemv(x, T, s.in, mat(i, 0), s2, s.rows, y, bench_stream(), norm); break;
        case Out::Residual: nvfp4_gemv_residual(x, T, s.in, mat(i, 0), s2, s.rows, y, bench_stream()); break;
        case Out::Logits:
          nvfp4_gemv_logits(x, T, s.in, mat(i, 0), s2, s.rows, static_cast<float*>(out), bench_stream());
          break;
        case Out::Act:
          nvfp4_gemv_gate_up(x, T, s.in, mat(i, 0), s2g, mat(i, 1), s2u, s.rows, y, bench_stream(), norm);
          break;
      }
    };
    f.reference = [&](const std::vector<bf16>& x, int T) {
      if (s.out == Out::Act) {
        std::vector<bf16> act;
        nvfp4_gate_up_ref(x, T, s.in, host[0], s2g, host[1], s2u, s.rows, act);
        return to_float(act);
      }
      std::vector<float> dot;
      nvfp4_gemv_ref(x, T, s.in, host[0], s2, s.rows, dot);
      return rounded(dot);
    };
    if (norm_pairs) bench_norm_pair(rng, s, f);
    else bench_shape(rng, s, f, tokens);
  }
}

}  // namespace striker::cuda::testing
