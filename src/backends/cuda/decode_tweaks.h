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
  bool rope_before_wait = true;  // qk_rope_kv.cu: gammas + RoPE cos/sin before the PDL wait
  bool attention_pipeline = true;  // decode attention: cp.async-pipelined tensor-core kernel (attention_pipe.cu)
  bool nvfp4_early_weights = true;       // Nvfp4DecodeVariant::nvfp4_early_weights (nvfp4_linear.h)
  bool nvfp4_moe_down_half_warp = true;  // Nvfp4DecodeVariant::moe_down_half_warp
  bool sliding_cluster = true;     // decode attention of <= 1024 keys: one cluster launch (attention_cluster.cu)
  bool attention_meta_early = true;  // decode attention: metadata lookups before the PDL wait
  bool router_cluster = true;  // router logits + top-K in one cluster launch for T <= 8 (router.cu)
  bool moe_cluster = true;  // BF16 decode MoE: gate/up + down in one cluster launch (moe_cluster.cu)
  bool qkv_rope_cluster = true;      // QKV GEMV + qk-norm/RoPE/KV write in one cluster launch
};

struct DecodeTweakEntry {
  const char* name;
  bool DecodeTweaks::*flag;
  const char* what;
};

// Name → switch. Helpers add one row per variant.
inline constexpr DecodeTweakEntry kDecodeTweaks[] = {
    {"rope_before_wait", &DecodeTweaks::rope_before_wait, "qk-norm/RoPE/KV-write: cos/sin before the PDL wait"},
    {"attention_pipeline", &DecodeTweaks::attention_pipeline,
     "split-KV decode attention stages K/V through a 3-stage cp.async ring per warp (off: register loads)"},
    {"nvfp4_early_weights", &DecodeTweaks::nvfp4_early_weights,
     "NVFP4 GEMV / gate-up / shared-expert warps load their first weight chunks before griddepcontrol.wait"},
    {"nvfp4_moe_down_half_warp", &DecodeTweaks::nvfp4_moe_down_half_warp,
     "NVFP4 MoE down (inter <= 512): one output row per half warp instead of two rows on 16 lanes"},
    {"sliding_cluster", &DecodeTweaks::sliding_cluster,
     "decode attention with <= 1024 keys (sliding layers): split + combine in one thread-block-cluster launch"},
    {"attention_meta_early", &DecodeTweaks::attention_meta_early,
     "decode attention: positions, block tables and first block ids read before the PDL wait"},
    {"router_cluster", &DecodeTweaks::router_cluster,
     "MoE router (T <= 8): logits and top-K selection in one launch, an 8-CTA cluster per token (off: two launches)"},
    {"moe_cluster", &DecodeTweaks::moe_cluster,
     "BF16 decode MoE: gate/up + down in one thread-block-cluster launch, combine + residual in the next norm"},
    {"qkv_rope_cluster", &DecodeTweaks::qkv_rope_cluster,
     "decode (T <= 8, BF16 or NVFP4 weights): QKV GEMV and qk-norm/RoPE/KV-cache write in one "
     "thread-block-cluster launch (qkv_rope_cluster.cu)"},
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
