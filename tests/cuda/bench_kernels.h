// The kernel benchmark families, one file each (bench_<family>.cpp), run in order by
// bench_kernels.cpp's main. Each prints its table rows (bench_util.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {

// bench_dense.cpp
void bench_gemv(std::mt19937& rng, const char* name, int T, int in, int out, bool logits);
void bench_gemm(std::mt19937& rng, LtGemm& lt, const char* name, int T, int in, int out);
void bench_rmsnorm(std::mt19937& rng, int rows, int H);
void bench_embedding(std::mt19937& rng);
// Per-launch floor of a chain of dependent PDL launches of an empty kernel (pdl_probe.h), 1 and 132 blocks.
void bench_pdl_chain_floor();

// bench_attention.cpp
// Decode attention of `seqs` sequences at position ctx-1 each, planned for max_keys keys (0: the
// real count; a captured decode graph plans for its key bucket, a power of two >= 1024).
void bench_attention(std::mt19937& rng, const std::string& name, int ctx, int window, int target, int seqs = 1,
                     int max_keys = 0);
// Prefill attention of one T-token chunk over a `prefix`-token cached prefix (Flint's shape):
// the prefill kernel and, from position 0, the decode kernel over the same queries; each checked
// against the CPU reference on sampled queries, the two against each other on every output.
// Prints ms, causal TFLOP/s and the fraction of the 774 TFLOP/s bf16 peak.
void bench_prefill_attention(std::mt19937& rng, const std::string& name, int T, int prefix, int window, int sms);
void bench_qk_rope(std::mt19937& rng);

// bench_prefill_small.cpp: the router, QK-norm + RoPE + KV write, residual add, SwiGLU and RMSNorm
// at T = 2048 and 8192 (also alone: `bench_cuda_kernels prefill-small`).
void bench_prefill_small_kernels(std::mt19937& rng, LtGemm& lt);

// bench_routing.cpp: the batched top-K selection and the routing sort alone at T = 8192, 1024, 16
// (also alone: `bench_cuda_kernels routing`).
void bench_routing_rows(std::mt19937& rng);
// The decode router (T <= 8) rows (bench_moe.cpp), also in `routing`.
void bench_router_decode_rows(std::mt19937& rng);

// bench_moe.cpp
void bench_router_moe(std::mt19937& rng);
// Routed experts of a T-token step at full size (E 256, top-6, H 2048, I 512; no shared
// expert): the device-side grouped path (sort, gate/up + SwiGLU, down, combine) kernel by
// kernel and in all, then the path it replaced (routing read back, host counting sort, three
// cuBLASLt GEMMs per active expert). GB/s counts the weights of the experts the routing touches;
// the check compares h of the first 4 tokens with moe_ref.
// Up to 8 tokens (decode), the per-slot kernels (moe.h) on the same routings instead of the old
// path. Launch i uses routing i % 8 (RotatedRoutings) so a few tokens' experts are not L2 hits.
void bench_moe_grouped(std::mt19937& rng, LtGemm& lt, int T);
// The Hopper grouped path (moe_grouped_wgmma.h) at the same shape: µs, TFLOP/s, fraction of 774;
// checked against the mma.sync path on every row and against moe_ref on the first 4 tokens.
void bench_moe_grouped_wgmma(std::mt19937& rng, int T);

// bench_decode.cpp: QKV, o_proj (+ residual), dense gate/up, LM head for each T of `tokens`
// (CUDA-core kernels at 1 token, tensor-core ones from 2), one reference each.
void bench_pdl_coherence();
void bench_decode_bf16(std::mt19937& rng, const std::vector<int>& tokens, bool norm_pairs = false);
void bench_decode_nvfp4(std::mt19937& rng, const std::vector<int>& tokens, bool norm_pairs = false);

// bench_nvfp4.cpp
// Codes uniform over all bytes, scale bytes in 0x30..0x3F.
Nvfp4HostMatrix random_nvfp4(std::mt19937& rng, int64_t rows, int in);
void bench_nvfp4_gemv(std::mt19937& rng, const char* name, int T, int in, int out, bool logits);
// Routed experts of one decode token: 6 of 256 NVFP4 experts + an NVFP4 shared expert, the
// routing rotated over 16 expert sets so the weights are not L2 hits.
void bench_nvfp4_moe(std::mt19937& rng);
// Per-slot MoE of 1, 2, 4, 8 decode tokens with a BF16 shared expert (bench_moe.cpp).
void bench_moe_per_slot_shared(std::mt19937& rng);

// Full-size NVFP4 expert stacks (E 256, H 2048, I 512), filled on the device once for every T.
struct Nvfp4ExpertStacks {
  static constexpr int E = 256, H = 2048, I = 512;
  DeviceBuffer<uint8_t> codes[3], scales[3];  // gate, up [E·I, H]; down [E·H, I]
  std::vector<float> s2[3];
  DeviceBuffer<float> d_s2[3];
  Nvfp4ExpertStacks() {
    for (int m = 0; m < 3; ++m) {
      const int64_t rows = int64_t(E) * (m < 2 ? I : H);
      const int in = m < 2 ? H : I;
      codes[m] = DeviceBuffer<uint8_t>(size_t(rows) * size_t(in / 2));
      scales[m] = DeviceBuffer<uint8_t>(size_t(rows) * size_t(in / 16));
      nvfp4_fill_random(codes[m].get(), scales[m].get(), rows, in, 31 + uint64_t(m), 0x30, 0x3F, nullptr);
      for (int e = 0; e < E; ++e) s2[m].push_back(e % 2 ? 0.0021f * (1 + e % 5) : std::ldexp(1.f, -8 - e % 3));
      d_s2[m] = DeviceBuffer<float>(s2[m]);
    }
  }
  Nvfp4Stack stack(int m) const { return {{codes[m].get(), scales[m].get()}, d_s2[m].get()}; }
  // Host copy of matrix m of the listed experts, as floats with scale2 applied (moe_float_ref input).
  std::vector<float> host_floats(int m, const std::vector<int32_t>& experts) const {
    const int64_t rows = m < 2 ? I : H, in = m < 2 ? H : I;
    std::vector<float> out;
    for (int32_t e : experts) {
      Nvfp4HostMatrix hm;
      hm.codes.resize(size_t(rows * in / 2));
      hm.scales.resize(size_t(rows * in / 16));
      STRIKER_CUDA_CHECK(cudaMemcpy(hm.codes.data(), codes[m].get() + e * rows * in / 2, hm.codes.size(),
                                    cudaMemcpyDeviceToHost));
      STRIKER_CUDA_CHECK(cudaMemcpy(hm.scales.data(), scales[m].get() + e * rows * in / 16, hm.scales.size(),
                                    cudaMemcpyDeviceToHost));
      for (float v : nvfp4_dequantize_ref(hm, rows, int(in))) out.push_back(v * s2[m][size_t(e)]);
    }
    return out;
  }
};

// The grouped MoE with NVFP4 experts (moe_grouped.h): as bench_moe_grouped, GB/s counting the
// NVFP4 bytes (codes + scales) of the experts the routing touches; the check compares h of the
// first 4 tokens with moe_float_ref on those tokens' experts.
void bench_nvfp4_moe_grouped(std::mt19937& rng, const Nvfp4ExpertStacks& w, int T);
// The Hopper grouped path with NVFP4 experts (weights decoded in registers): gate/up, down and
// the whole layer; checked against the NVFP4 mma.sync path on every row and against
// moe_float_ref on the first 4 tokens.
void bench_nvfp4_moe_grouped_wgmma(std::mt19937& rng, const Nvfp4ExpertStacks& w, int T);
// Prefill projection: dequantise into the scratch + cuBLASLt with alpha = scale2.
void bench_nvfp4_gemm(std::mt19937& rng, LtGemm& lt, const char* name, int T, int in, int out);

}  // namespace striker::cuda::testing
