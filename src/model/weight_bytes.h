// How many weight bytes Flint reads per step, from the config and the storage format of the
// linear weights. The benchmarks divide these by the measured step time to report how close a
// step comes to the memory-bandwidth roofline, so every count here is the bytes one step must
// read at least once (each active weight exactly once), not what a kernel happens to touch.
#pragma once
#include <cstdint>
#include <string>

#include "model/config.h"

namespace striker {

// Storage of the linear weights (attention, dense MLP, experts, shared expert, lm_head):
// BF16 (FLINT.md §2) or NVFP4 W4A16 (§3). Everything else is format-independent.
enum class LinearFormat { bf16, nvfp4 };

std::string linear_format_name(LinearFormat format);  // "BF16" / "NVFP4"

// Bytes per linear weight: 2 for BF16; NVFP4: half a byte of code + one UE4M3 byte per 16
// weights = 0.5 + 1/16 (the per-tensor/per-expert global scale is negligible and not counted).
double linear_bytes_per_weight(LinearFormat format);

// Weight counts (elements, not bytes) that one token's forward pass reads, by role.
// `experts_per_moe_layer`: routed experts read per MoE layer (K for one token; for a batch,
// the expected number of distinct experts, see expected_distinct_experts).
struct ActiveWeights {
  double attention = 0;       // q, k, v, o over all layers
  double dense_mlp = 0;       // gate, up, down on dense layers
  double routed_experts = 0;  // gate, up, down of the experts read, MoE layers
  double shared_experts = 0;  // the always-on shared expert(s), MoE layers
  double lm_head = 0;         // [V, H]
  double router = 0;          // [E, H] per MoE layer, stored BF16
  double router_bias = 0;     // [E] per MoE layer, F32
  double norms = 0;           // input/post norms, q/k norms, sinks, final norm: F32 on the backends
  double embedding_rows = 0;  // H per token, BF16

  double linear() const { return attention + dense_mlp + routed_experts + shared_experts + lm_head; }
  // Bytes: linear weights in `format`, router and embedding rows BF16 (2 B), bias and norms F32 (4 B).
  double bytes(LinearFormat format) const;
};

ActiveWeights active_weights(const FlintConfig& config, double experts_per_moe_layer, double tokens = 1);

// Weight bytes one batch-1 decode step reads: K routed experts per MoE layer, one embedding row.
double decode_weight_bytes(const FlintConfig& config, LinearFormat format);

// Expected distinct experts a batch of B tokens reads in one MoE layer when each token picks K of
// E uniformly: E·(1 - (1 - K/E)^B). A model's real routing is not uniform, so this is an estimate.
double expected_distinct_experts(const FlintConfig& config, double batch);

// Weight bytes one decode step of `batch` sequences reads (expected distinct experts, one
// embedding row per sequence).
double batch_decode_weight_bytes(const FlintConfig& config, LinearFormat format, double batch);

// KV-cache bytes (BF16 K and V) one new token at position `context` (0-based, i.e. `context`
// tokens already cached) reads: context+1 keys on full layers, at most sliding_window on sliding ones.
double decode_kv_bytes(const FlintConfig& config, int64_t context);

}  // namespace striker
