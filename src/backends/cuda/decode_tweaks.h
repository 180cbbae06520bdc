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
  bool nvfp4_early_weights = true;       // Nvfp4DecodeVariant::early_weights (nvfp4_linear.h)
  bool nvfp4_persistent_lm_head = true;  // Nvfp4DecodeVariant::persistent_lm_head
  bool nvfp4_moe_down_half_warp = true;  // Nvfp4DecodeVariant::moe_down_half_warp
};

struct DecodeTweakEntry {
  const char* name;
  bool DecodeTweaks::*flag;
  const char* what;
};

// Name → switch. Helpers add one row per variant.
inline constexpr DecodeTweakEntry kDecodeTweaks[] = {
    {"nvfp4_early_weights", &DecodeTweaks::nvfp4_early_weights,
     "NVFP4 GEMV / gate-up / shared-expert warps load their first weight chunks before griddepcontrol.wait"},
    {"nvfp4_persistent_lm_head", &DecodeTweaks::nvfp4_persistent_lm_head,
     "NVFP4 LM head at T=1: one wave of CTAs striding over row tiles, next tile's weights loaded ahead"},
    {"nvfp4_moe_down_half_warp", &DecodeTweaks::nvfp4_moe_down_half_warp,
     "NVFP4 MoE down (inter <= 512): one output row per half warp instead of two rows on 16 lanes"},
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
