// Switches for decode-kernel variants still under measurement. Each new variant is on by default
// and can be turned off by name (`striker bench latency --disable-tweak NAME`), so one GPU run times
// a full step with and without it (last session's lesson: changes measured only as a group could
// not be told apart; docs/performance.md). A variant measured slower is deleted, not left off, and a
// variant that has proven itself loses its switch: this list should stay short.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace striker::cuda {

struct DecodeTweaks {
  // One bool per variant, each listed in kDecodeTweaks below.
  bool attention_pipeline = true;  // decode attention: cp.async-pipelined tensor-core kernel (attention_pipe.cu)
  bool nvfp4_early_weights = true;       // Nvfp4DecodeVariant::nvfp4_early_weights (nvfp4_linear.h)
  bool nvfp4_moe_down_half_warp = true;  // Nvfp4DecodeVariant::moe_down_half_warp
  bool router_cluster = true;  // router logits + top-K in one cluster launch for T <= 8 (router.cu)
};

struct DecodeTweakEntry {
  const char* name;
  bool DecodeTweaks::*flag;
  const char* what;
};

// Name → switch. Helpers add one row per variant.
inline constexpr DecodeTweakEntry kDecodeTweaks[] = {
    {"attention_pipeline", &DecodeTweaks::attention_pipeline,
     "split-KV decode attention stages K/V through a 3-stage cp.async ring per warp (off: register loads)"},
    {"nvfp4_early_weights", &DecodeTweaks::nvfp4_early_weights,
     "NVFP4 GEMV / gate-up / shared-expert warps load their first weight chunks before griddepcontrol.wait"},
    {"nvfp4_moe_down_half_warp", &DecodeTweaks::nvfp4_moe_down_half_warp,
     "NVFP4 MoE down (inter <= 512): one output row per half warp instead of two rows on 16 lanes"},
    {"router_cluster", &DecodeTweaks::router_cluster,
     "MoE router (T <= 8): logits and top-K selection in one launch, an 8-CTA cluster per token (off: two launches)"},
    {nullptr, nullptr, nullptr},  // terminator (keeps the array non-empty)
};

// Turns the named variant on or off; false if no variant has that name.
inline bool set_decode_tweak(DecodeTweaks& t, std::string_view name, bool on) {
  for (const DecodeTweakEntry& e : kDecodeTweaks)
    if (e.name != nullptr && name == e.name) {
      t.*(e.flag) = on;
      return true;
    }
  return false;
}

inline std::vector<std::string> decode_tweak_names() {
  std::vector<std::string> names;
  for (const DecodeTweakEntry& e : kDecodeTweaks)
    if (e.name != nullptr) names.emplace_back(e.name);
  return names;
}

}  // namespace striker::cuda
