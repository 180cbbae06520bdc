// Flint's weights resident on the GPU, in the layouts the kernels read:
// q|k|v concatenated into one [(nh+2nkv)·d, H] matrix, routed experts stacked per layer
// ([E, I, H] gate/up, [E, H, I] down), norms / sinks / router bias in fp32.
//
// Any linear weight may be BF16 or NVFP4 (FLINT.md §3). Each has a bf16 pointer and an `nv_`
// twin (Nvfp4Linear / Nvfp4Experts, layout in nvfp4_linear.h); exactly one of the two is set,
// and the layer loop dispatches on which. Restrictions (a clear error at upload otherwise):
// q, k and v share one format (NVFP4 q|k|v keeps three scale2 values as row ranges); the routed
// experts' gate/up/down share one format, so do the shared expert's; BF16 routed experts
// with an NVFP4 shared expert are not supported (the reverse is).
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "core/bf16.h"
#include "model/config.h"
#include "model/weight_bytes.h"
#include "model/weights.h"

namespace striker::cuda {

// How the linear weights are stored on the device (FLINT.md §2 BF16, §3 NVFP4 W4A16): the
// model's own LinearFormat (model/weight_bytes.h).
using WeightFormat = LinearFormat;

// An NVFP4 linear weight on the device; present() when the weight is NVFP4.
struct Nvfp4Linear {
  uint8_t* codes = nullptr;   // [rows, in/2]
  uint8_t* scales = nullptr;  // [rows, in/16]
  RowScale2 scale2;           // one value, or three row ranges for q|k|v
  bool present() const { return codes != nullptr; }
  Nvfp4Matrix matrix() const { return {codes, scales}; }
};

// Stacked NVFP4 experts [E, rows, in] with one scale2 per expert (device array for the decode
// kernels, host copy for the prefill GEMMs' alpha).
struct Nvfp4Experts {
  uint8_t* codes = nullptr;
  uint8_t* scales = nullptr;
  float* scale2 = nullptr;        // device [E]
  std::vector<float> scale2_host;  // [E]
  bool present() const { return codes != nullptr; }
  Nvfp4Stack stack() const { return {{codes, scales}, scale2}; }
};

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
  // NVFP4 twins of the linear weights above (set instead of the bf16 pointer).
  Nvfp4Linear nv_qkv, nv_o, nv_gate, nv_up, nv_down, nv_sh_gate, nv_sh_up, nv_sh_down;
  Nvfp4Experts nv_exp_gate, nv_exp_up, nv_exp_down;
};

class DeviceModel {
 public:
  // Uploads a loaded checkpoint (BF16 and/or NVFP4 linear weights); throws striker::Error
  // naming the tensor for a shape, dtype or format mix the CUDA backend cannot use.
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
  Nvfp4Linear nv_lm_head;     // instead of lm_head when `output` is NVFP4
  std::vector<DeviceLayer> layers;
  int64_t bytes = 0;          // device memory held by the weights

 private:
  template <typename T>
  T* alloc(int64_t count);
  std::vector<void*> allocations_;
};

}  // namespace striker::cuda
