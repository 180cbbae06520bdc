// CudaBackend's private state, shared by its translation units (cuda_backend.cpp: construction,
// KV cache, forward and graphs; cuda_step_plan.cpp: plan(); flint_forward.cpp and ops_*.cpp: the layer loop):
// the device workspace every step uses, allocated once, and the host-side plan of one step.
// Not part of the backend's interface.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/nvfp4/nvfp4_prefill.h"

namespace striker::cuda {

constexpr int kGemvMaxTokens = 8;  // up to this many tokens the weights are streamed by GEMV kernels
// NVFP4 experts (with an NVFP4 shared expert) run on the per-slot decode kernels (nvfp4_moe.h) up to this many
// tokens, on the grouped ones (moe_grouped.h) above. Measured (docs/performance.md, thirty-fifth session; H100,
// 1K context, device ms): 9 sequences 6.10 -> 5.21, 16 7.76 -> 7.23, 24 10.10 -> 9.89, but 32 11.29 -> 12.30.
// With the shared expert as skinny tiles (nvfp4_moe_shared_skinny, thirty-sixth session) the crossover moved:
// 28 sequences 10.64 -> 10.24, 32 11.23 -> 11.36.
// BF16 experts per slot lost from 12 tokens (+0.46 ms), so they leave the per-slot kernels above kGemvMaxTokens.
constexpr int kMoePerSlotMaxTokensNvfp4 = 28;
// Sequences with at least this many queries in a step take the tensor-core prefill attention
// (one tile of 16 queries reads each key once); shorter ones, decodes above all, keep the
// split-KV decode kernel, which spreads one query's long context over many CTAs.
constexpr int kPrefillMinRun = kPrefillTileTokens;

// One device allocation, freed with the workspace.
struct DeviceArena {
  std::vector<void*> blocks;
  ~DeviceArena() {
    for (void* p : blocks) cudaFree(p);
  }
  template <typename T>
  T* get(int64_t count) {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, size_t(std::max<int64_t>(count, 1)) * sizeof(T));
    if (err != cudaSuccess)
      throw Error("CUDA backend: cannot allocate a " + std::to_string((count * int64_t(sizeof(T))) >> 20) +
                  " MiB work buffer: " + cudaGetErrorString(err));
    blocks.push_back(p);
    return static_cast<T*>(p);
  }
};

inline size_t align16(size_t n) { return (n + 15) & ~size_t(15); }

struct CudaBackend::Workspace {
  DeviceArena arena;
  LtGemm lt;
  bf16 *h, *x, *qkv, *q, *attn, *tmp, *gate, *up, *act, *moe_act, *shared_act, *logit_x, *logits_bf16;
  bf16* moe_y = nullptr;  // per-slot steps: each slot's down output [T·(K+1), H] (moe.h)
  float *router_logits, *topk_w, *logits, *inv_freq;
  int32_t* topk_ids;
  // The decode router's exchange words (router.h, kRouterSyncWords): zero between launches.
  unsigned int* router_counter = nullptr;
  AttentionScratch scratch;
  // Step metadata: one pinned host buffer, one device buffer, one copy per step.
  size_t meta_bytes = 0;
  size_t sliding_base = 0;  // offset of the sliding block tables in the metadata buffers
  std::byte* meta_host = nullptr;
  std::byte* meta_dev = nullptr;
  float* logits_host = nullptr;  // pinned
  // Routed experts of steps above 8 tokens (moe_grouped.h), BF16 or NVFP4: the routing sorted by
  // expert on the device (tile_rows is chosen per step), SwiGLU activations and expert outputs
  // in sorted order.
  MoeRouting routing;
  bf16 *a_sorted = nullptr, *y_sorted = nullptr;
  Nvfp4Scratch nv_scratch;  // dequantised NVFP4 dense/shared weights of prefill chunks (none without NVFP4)
  ~Workspace() {
    if (meta_host) cudaFreeHost(meta_host);
    if (logits_host) cudaFreeHost(logits_host);
  }
};

// Host-side description of one step; device pointers point into ws_->meta_dev.
struct CudaBackend::StepPlan {
  int T = 0, rows = 0;
  int max_keys_full = 0, max_keys_sliding = 0;
  // Prefill attention: tiles of the sequences with >= kPrefillMinRun queries, and the indices of
  // the other queries with their key bounds. Used only when use_prefill (set by forward()).
  int num_prefill_tiles = 0, num_tiled = 0, num_rest = 0, max_keys_full_rest = 0, max_keys_sliding_rest = 0;
  bool use_prefill = false;
  // Every sequence brings one token (a plain decode step): no query reads another query's new key,
  // so the attention front can run inside the split kernel (ops_attention.cpp). Part of the graph key.
  bool one_query_per_sequence = false;
  const int32_t *prefill_tiles = nullptr, *tiled_queries = nullptr, *rest_queries = nullptr;
  size_t bytes = 0;          // metadata bytes used from offset 0
  size_t sliding_bytes = 0;  // and from sliding_base
  const int32_t *tokens = nullptr, *positions = nullptr, *off_full = nullptr, *off_sliding = nullptr,
                *tables_full = nullptr, *tables_sliding = nullptr, *logit_rows = nullptr;
  const int64_t *slots_full = nullptr, *slots_sliding = nullptr;
  // Async scheduling: (token index, sample index) pairs of the tokens taken from the previous
  // launched step's draws (SequenceChunk::token_from_sample), patched in before the layers run.
  const int32_t* take_pairs = nullptr;
  int num_take = 0;
};

}  // namespace striker::cuda
