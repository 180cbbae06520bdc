// Flint's weights resident on the GPU, in the layouts the kernels read:
// q|k|v concatenated into one [(nh+2nkv)·d, H] matrix, routed experts stacked per layer
// ([E, I, H] gate/up, [E, H, I] down), norms / sinks / router bias in fp32.
#pragma once
#include <cstdint>
#include <vector>

#include "core/bf16.h"
#include "model/config.h"
#include "model/weights.h"

namespace striker::cuda {

// How the linear weights are stored on the device (FLINT.md §2 BF16, §3 NVFP4 W4A16).
enum class WeightFormat { bf16, nvfp4 };

struct DeviceLayer {
  float* input_norm = nullptr;
  float* post_norm = nullptr;
  float* q_norm = nullptr;
  float* k_norm = nullptr;
  float* sinks = nullptr;         // null when the config has no sinks
  bf16* wqkv = nullptr;           // [(nh+2nkv)·d, H]
  bf16* wo = nullptr;             // [H, nh·d]
  // dense layers
  bf16* gate = nullptr;           // [I, H]
  bf16* up = nullptr;
  bf16* down = nullptr;           // [H, I]
  // MoE layers
  bf16* router_bf16 = nullptr;    // [E, H], or
  float* router_f32 = nullptr;    // [E, H]
  float* router_bias = nullptr;   // [E]
  bf16* exp_gate = nullptr;       // [E, I, H]
  bf16* exp_up = nullptr;
  bf16* exp_down = nullptr;       // [E, H, I]
  bf16* sh_gate = nullptr;        // [Is, H] (null without a shared expert)
  bf16* sh_up = nullptr;
  bf16* sh_down = nullptr;        // [H, Is]
};

class DeviceModel {
 public:
  // Uploads a loaded BF16 checkpoint; throws striker::Error naming the tensor for a shape or
  // dtype the CUDA backend cannot use (NVFP4 is not supported by this backend yet).
  static DeviceModel upload(const LoadedModel& model);
  // Random weights made on the GPU for `config` (--load-format dummy): residual-branch output
  // projections scaled to 0.2/sqrt(fan_in) as FLINT.md §4 asks of random checkpoints.
  // `nvfp4` makes random NVFP4 codes/scales for every linear weight a GGUF would store as NVFP4.
  static DeviceModel random(const FlintConfig& config, uint64_t seed, WeightFormat format = WeightFormat::bf16);

  DeviceModel() = default;
  ~DeviceModel();
  DeviceModel(DeviceModel&& o) noexcept;
  DeviceModel& operator=(DeviceModel&& o) noexcept;
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  FlintConfig config;
  bf16* embed = nullptr;      // [V, H]
  float* final_norm = nullptr;
  bf16* lm_head = nullptr;    // [V, H]
  std::vector<DeviceLayer> layers;
  int64_t bytes = 0;          // device memory held by the weights

 private:
  template <typename T>
  T* alloc(int64_t count);
  std::vector<void*> allocations_;
};

}  // namespace striker::cuda
