// Times every decode kernel (and the prefill ones) at Flint's full-size shapes on the GPU and checks each result
// against the CPU reference on the same data. Prints one table row per kernel:
//   kernel | check (max error ratio, <= 1 passes) | µs | GB/s | fraction of 4.6 TB/s (H200 streaming read), each launch timed inside a replayed graph.
// Weights are rotated over several copies (>= 256 MiB in all) so timings are not L2 hits.
// main runs the families (bench_dense, bench_attention, bench_moe, bench_nvfp4.cpp) in a fixed order;
// Sections alone: `bench_cuda_kernels grouped-moe` (the grouped MoE rows, both paths, BF16 and
// NVFP4, at the prefill sizes T = 2048 and 8192; NVFP4 also at 1024 and 1536, around the paths'
// switch), `grouped-moe-nvfp4` (the NVFP4 rows of both paths alone at T = 1024, 1536, 2048),
// `grouped-moe-wgmma` (the BF16 Hopper rows alone at T = 2048, 4096, 8192), `prefill` (prefill attention, then the small
// prefill kernels), `prefill-attention` (the attention rows alone), `prefill-small` (the small
// kernels alone: bench_prefill_small.cpp), `decode` (the decode
// rows of 1, 2, 4 and 8 tokens: bench_decode.cpp and the MoE of those steps, after the attention
// rows), `decode-attention` (those attention rows alone), `decode-moe` (the MoE rows of the decode
// steps alone), `batched-moe [T ...]` (the grouped expert kernels of batched decode steps, T = 8, 16, 64,
// 256 or the T given, BF16 and NVFP4, with the per-slot NVFP4 rows at T = 8; T above 682 runs the 64-row tiles), `decode-linear` (the dense projection rows of bench_decode.cpp alone), `pdl-coherence`
// (stale reads after griddepcontrol.wait per load path: pdl_coherence_probe.h), `routing` (the batched top-K selection and the routing sort alone: bench_routing.cpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/common/device_info.h"
#include "backends/cuda/linear/gemm_lt.h"
#include "bench_kernels.h"
#include "bench_util.h"
#include "cuda_test_util.h"

using namespace striker;
using namespace striker::cuda;
using namespace striker::cuda::testing;

namespace {

void bench_copy() {
  const size_t n = size_t(2) << 30;
  DeviceBuffer<char> a(n), b(n);
  STRIKER_CUDA_CHECK(cudaMemset(a.get(), 1, n));
  const double us = time_us([&](int) { STRIKER_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), n, cudaMemcpyDeviceToDevice, bench_stream())); });
  row("copy 2 GiB (read+write)", nullptr, us, 2.0 * n);
}

// NVFP4 experts on both paths, the 64-row mma.sync kernels and the register-decode wgmma ones,
// side by side at each T. Production switches at 24 rows per expert (moe_wgmma_nvfp4_for):
// T = 1024, 1536, 2048 are 24, 36, 48 rows on each of Flint's 256 experts.
void bench_nvfp4_moe_paths(std::mt19937& rng, const Nvfp4ExpertStacks& stacks, std::initializer_list<int> tokens) {
  for (int T : tokens) {
    bench_nvfp4_moe_grouped(rng, stacks, T);
    bench_nvfp4_moe_grouped_wgmma(rng, stacks, T);
  }
}

// The grouped-MoE rows at prefill sizes: the mma.sync path and the Hopper path side by side.
void bench_grouped_moe_prefill(std::mt19937& rng, LtGemm& lt, const Nvfp4ExpertStacks& stacks) {
  for (int T : {2048, 8192}) {
    bench_moe_grouped(rng, lt, T);
    bench_moe_grouped_wgmma(rng, T);
  }
  bench_nvfp4_moe_paths(rng, stacks, {1024, 1536, 2048, 8192});
}

// The BF16 Hopper rows alone (`bench_cuda_kernels grouped-moe-wgmma`): ~48, 96, 192 rows per expert.
void bench_grouped_moe_wgmma_rows(std::mt19937& rng) {
  for (int T : {2048, 4096, 8192}) bench_moe_grouped_wgmma(rng, T);
}

// The prefill attention rows (also alone: `bench_cuda_kernels prefill`): full causal and sliding
// 8192-token chunks from position 0, and an 8192-token chunk over a 90K-token prefix (the
// chunks of a 100K prompt after the first).
void bench_prefill_rows(std::mt19937& rng, int sms) {
  bench_prefill_attention(rng, "prefill attn full 8192", 8192, 0, 0, sms);
  bench_prefill_attention(rng, "prefill attn sliding W=513 8192", 8192, 0, 513, sms);
  bench_prefill_attention(rng, "prefill attn 8192 over 90K prefix", 8192, 90000, 0, sms);
  bench_prefill_attention(rng, "prefill attn W=513 8192 over 90K", 8192, 90000, 513, sms);
}

// Decode steps of 1, 2, 4, 8 tokens: the projections, then the routed experts (per-slot and
// grouped), BF16 and NVFP4.
void bench_decode_steps(std::mt19937& rng, LtGemm& lt) {
  const std::vector<int> tokens = {1, 2, 4, 8};
  bench_decode_bf16(rng, tokens);
  bench_decode_nvfp4(rng, tokens);
  bench_router_moe(rng);  // includes the T = 1 per-slot MoE with its shared expert
  for (int T : tokens) bench_moe_grouped(rng, lt, T);
  const Nvfp4ExpertStacks stacks;
  bench_nvfp4_moe(rng);
  for (int T : tokens) bench_nvfp4_moe_grouped(rng, stacks, T);
}

// The MoE rows of decode steps alone (`decode-moe`): the per-slot kernels (production up to 8
// tokens) at T = 1, 2, 4, 8 with the shared expert, and without it (also each kernel alone) beside
// the grouped path of the same routing, BF16 and NVFP4.
void bench_decode_moe(std::mt19937& rng, LtGemm& lt) {
  bench_moe_per_slot_shared(rng);
  for (int T : {1, 2, 4, 8}) bench_moe_grouped(rng, lt, T);
  const Nvfp4ExpertStacks stacks;
  bench_nvfp4_moe(rng);
  for (int T : {1, 2, 4, 8}) bench_nvfp4_moe_grouped(rng, stacks, T);
}

// The decode attention rows of a step at batch 1 and 8 (the backend's split target).
// The decode step's attention launches: full layers planned for the real key count and for the
// key bucket a captured decode graph plans for (8K context: 16,384; 100K: 131,072), sliding
// layers (the bucket of 1,024 keys plans for the window either way).
void bench_decode_attention(std::mt19937& rng, int sms) {
  for (int seqs : {1, 2, 4, 8}) {
    const std::string tag = " x" + std::to_string(seqs) + " seqs";
    if (seqs == 1 || seqs == 8) bench_attention(rng, "attn full ctx=8192" + tag, 8192, 0, 3 * sms, seqs);
    bench_attention(rng, "attn full ctx=8192" + tag + " b16K", 8192, 0, 3 * sms, seqs, 16384);
    bench_attention(rng, "attn sliding W=513" + tag, 8192, 513, 3 * sms, seqs, 1024);
  }
  bench_attention(rng, "attn full ctx=100000 x1 seqs b128K", 100000, 0, 3 * sms, 1, 131072);
}

}  // namespace

int main(int argc, char** argv) {
  // One section alone (see the top of this file).
  const std::string only = argc > 1 ? argv[1] : "";
  static const char* const kFamilies[] = {"grouped-moe", "grouped-moe-nvfp4", "grouped-moe-wgmma", "prefill",
                                          "prefill-attention", "prefill-small", "decode", "decode-attention",
                                          "decode-moe", "batched-moe", "decode-linear", "decode-norm", "routing",
                                          "pdl-coherence"};
  const bool known = only.empty() || std::find(std::begin(kFamilies), std::end(kFamilies), only) != std::end(kFamilies);
  std::vector<int> token_counts;  // batched-moe's T values, if given
  for (int i = 2; i < argc && only == "batched-moe"; ++i) {
    const int T = std::atoi(argv[i]);
    if (T < 1 || T > 4096) {
      std::fprintf(stderr, "batched-moe: T must be 1..4096, got '%s'\n", argv[i]);
      return 2;
    }
    token_counts.push_back(T);
  }
  if ((argc > 2 && only != "batched-moe") || !known) {
    std::fprintf(stderr, "usage: bench_cuda_kernels [");
    for (const char* f : kFamilies) std::fprintf(stderr, "%s%s", f, f == kFamilies[std::size(kFamilies) - 1] ? "]\n" : " | ");
    std::fprintf(stderr, "       bench_cuda_kernels batched-moe T...\n");
    return 2;
  }
  if (token_counts.empty()) token_counts = {8, 16, 64, 256};
  try {
    std::printf("device: %s\n", device_summary().c_str());
    if (device_count() == 0) {
      std::printf("no GPU: nothing measured\n");
      return 2;
    }
    std::mt19937 rng(2026);
    std::printf("| %-34s | %-10s | %9s | %8s | %5s |\n", "kernel", "check", "us", "GB/s", "/4.6T");
    if (only == "routing") {
      bench_routing_rows(rng);
      std::printf("kernel checks failed: %d\n", kernel_check_failures());
      return kernel_check_failures() == 0 ? 0 : 1;
    }
    if (only == "grouped-moe-wgmma") {
      bench_grouped_moe_wgmma_rows(rng);
      std::printf("kernel checks failed: %d\n", kernel_check_failures());
      return kernel_check_failures() == 0 ? 0 : 1;
    }
    if (only == "grouped-moe" || only == "grouped-moe-nvfp4") {
      LtGemm lt;
      const Nvfp4ExpertStacks stacks;
      if (only == "grouped-moe") bench_grouped_moe_prefill(rng, lt, stacks);
      else bench_nvfp4_moe_paths(rng, stacks, {1024, 1536, 2048});
      const int failures = kernel_check_failures();
      std::printf("kernel checks failed: %d\n", failures);
      return failures == 0 ? 0 : 1;
    }
    if (only == "prefill" || only == "prefill-attention" || only == "prefill-small") {
      int sms = 0;
      STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
      if (only != "prefill-small") bench_prefill_rows(rng, sms);
      if (only != "prefill-attention") {
        LtGemm lt;
        bench_prefill_small_kernels(rng, lt);
      }
      std::printf("kernel checks failed: %d\n", kernel_check_failures());
      return kernel_check_failures() == 0 ? 0 : 1;
    }
    bench_copy();
    if (only == "decode-linear") {  // the dense decode projections alone (the first rows of `decode`)
      bench_decode_bf16(rng, {1, 2, 4, 8});
      bench_decode_nvfp4(rng, {1, 2, 4, 8});
      std::printf("kernel checks failed: %d\n", kernel_check_failures());
      return kernel_check_failures() == 0 ? 0 : 1;
    }
    if (only == "decode-norm") {  // one token: rmsnorm kernel + GEMV against the GEMV with the norm inside
      bench_decode_bf16(rng, {1}, true);
      bench_decode_nvfp4(rng, {1}, true);
      std::printf("kernel checks failed: %d\n", kernel_check_failures());
      return kernel_check_failures() == 0 ? 0 : 1;
    }
    if (only == "pdl-coherence") {  // stale reads after griddepcontrol.wait, per load path
      bench_pdl_coherence();
      std::printf("kernel checks failed: %d\n", kernel_check_failures());
      return kernel_check_failures() == 0 ? 0 : 1;
    }
    if (only == "decode-moe") {
      LtGemm lt;
      bench_decode_moe(rng, lt);
      std::printf("kernel checks failed: %d\n", kernel_check_failures());
      return kernel_check_failures() == 0 ? 0 : 1;
    }
    if (only == "batched-moe") {  // the grouped expert kernels of batched decode steps, both formats
      LtGemm lt;
      const Nvfp4ExpertStacks stacks;
      for (int T : token_counts) {  // T = 8 also prints the per-slot NVFP4 kernels beside the grouped ones
        bench_moe_grouped(rng, lt, T);
        bench_nvfp4_moe_grouped(rng, stacks, T);
      }
      std::printf("kernel checks failed: %d\n", kernel_check_failures());
      return kernel_check_failures() == 0 ? 0 : 1;
    }
    if (only == "decode" || only == "decode-attention") {
      int sms = 0;
      STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
      bench_decode_attention(rng, sms);
      if (only == "decode-attention") {
        std::printf("kernel checks failed: %d\n", kernel_check_failures());
        return kernel_check_failures() == 0 ? 0 : 1;
      }
      LtGemm lt;
      bench_decode_steps(rng, lt);
      const int failures = kernel_check_failures();
      std::printf("kernel checks failed: %d\n", failures);
      return failures == 0 ? 0 : 1;
    }
    bench_embedding(rng);
    bench_rmsnorm(rng, 1, 2048);
    bench_qk_rope(rng);
    bench_gemv(rng, "gemv qkv 5120x2048 T=1", 1, 2048, 5120, false);
    bench_gemv(rng, "gemv o_proj 2048x4096 T=1", 1, 4096, 2048, false);
    bench_gemv(rng, "gemv dense down 2048x8192 T=1", 1, 8192, 2048, false);
    bench_gemv(rng, "gemv expert down 2048x512 T=1", 1, 512, 2048, false);
    bench_gemv(rng, "lm_head 151552x2048 T=1 (fp32 out)", 1, 2048, 151552, true);
    bench_pdl_chain_floor();
    int sms = 0;
    STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int t : {3 * sms, 0}) {  // the backend's split target (one wave), and the kernel's default
      bench_attention(rng, "attn full ctx=8192", 8192, 0, t);
      bench_attention(rng, "attn full ctx=100000", 100000, 0, t);
      bench_attention(rng, "attn sliding W=513", 100000, 513, t);
    }
    bench_attention(rng, "attn full ctx=8192 x8 seqs", 8192, 0, 3 * sms, 8);  // batch-8 decode
    bench_attention(rng, "attn sliding W=513 x8 seqs", 8192, 513, 3 * sms, 8);
    bench_prefill_rows(rng, sms);
    LtGemm lt;
    bench_prefill_small_kernels(rng, lt);
    bench_routing_rows(rng);
    bench_decode_steps(rng, lt);
    bench_gemm(rng, lt, "gemm qkv T=8192 (cuBLASLt)", 8192, 2048, 5120);
    bench_gemm(rng, lt, "gemm dense up T=8192 (cuBLASLt)", 8192, 2048, 8192);
    for (int T : {16, 64, 256}) bench_moe_grouped(rng, lt, T);
    {
      const Nvfp4ExpertStacks stacks;
      for (int T : {16, 64, 256}) bench_nvfp4_moe_grouped(rng, stacks, T);
      bench_grouped_moe_prefill(rng, lt, stacks);
    }
    bench_nvfp4_gemv(rng, "nvfp4 gemv qkv 5120x2048 T=1", 1, 2048, 5120, false);
    bench_nvfp4_gemv(rng, "nvfp4 gemv o_proj 2048x4096 T=1", 1, 4096, 2048, false);
    bench_nvfp4_gemv(rng, "nvfp4 gemv dense down 2048x8192 T=1", 1, 8192, 2048, false);
    bench_nvfp4_gemv(rng, "nvfp4 lm_head 151552x2048 T=1", 1, 2048, 151552, true);
    bench_nvfp4_gemm(rng, lt, "nvfp4 gemm qkv T=8192 (deq+Lt)", 8192, 2048, 5120);
    const int g_failures = kernel_check_failures();
    std::printf("kernel checks failed: %d\n", g_failures);
    return g_failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
