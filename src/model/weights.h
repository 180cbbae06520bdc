// Host-side views of every Flint weight (FLINT.md §2 names, §3 for NVFP4).
// Loaders fill these; backends read them (the CUDA backend uploads them once).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace striker {

// A read-only view of one tensor in host memory (an mmap'd file or an owned buffer).
struct WeightView {
  std::string name;              // checkpoint name, for error messages
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;    // row-major; linear weights are [out, in]
  const std::byte* data = nullptr;
  size_t nbytes = 0;
  float scale2 = 1.0f;           // NVFP4 global scale (FLINT.md §3); 1.0 for other types
  // NVFP4 only, in the "split" layout of model/nvfp4.h: `data` holds the codes [rows, in/2]
  // and `nvfp4_scales` the UE4M3 scale bytes [rows, in/16]; shape stays [out, in] in weights.
  const std::byte* nvfp4_scales = nullptr;

  bool empty() const { return data == nullptr; }
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? 0 : shape[1]; }
  int64_t numel() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
};

// A SwiGLU MLP: gate/up [I, H], down [H, I].
struct MlpWeights {
  WeightView gate, up, down;
};

struct LayerWeights {
  WeightView input_norm;        // [H]
  WeightView q_proj;            // [n_heads*d, H]
  WeightView k_proj, v_proj;    // [n_kv*d, H]
  WeightView o_proj;            // [H, n_heads*d]
  WeightView q_norm, k_norm;    // [d], shared across heads
  WeightView sinks;             // [n_heads], BF16 or F32
  WeightView post_attn_norm;    // [H]
  // Dense layers (l < first_k_dense_replace):
  MlpWeights dense;             // gate/up [intermediate_size, H]
  // MoE layers:
  WeightView router;            // [E, H], BF16 or F32
  WeightView router_bias;       // [E] F32 e_score_correction_bias (selection only)
  std::vector<MlpWeights> experts;  // E entries, gate/up [moe_I, H]
  MlpWeights shared;            // gate/up [shared_I, H]
};

struct FlintWeights {
  WeightView embed;             // [V, H]
  std::vector<LayerWeights> layers;
  WeightView final_norm;        // [H]
  WeightView lm_head;           // [V, H]
};

// A loaded model: config + weight views + whatever owns the bytes behind them.
struct LoadedModel {
  FlintConfig config;
  FlintWeights weights;
  std::string source;                    // path or repo id it came from
  std::vector<std::shared_ptr<void>> storage;  // mmaps / buffers keeping `weights` alive
};

}  // namespace striker
