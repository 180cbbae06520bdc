// The DecodeTweaks name table (decode_tweaks.h): every variant is on by default, reachable by its
// name (what `striker bench latency --disable-tweak NAME` passes), and names are unique.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "backends/cuda/decode_tweaks.h"

namespace striker::cuda {
namespace {

TEST(DecodeTweaks, EarlyWeightsAndFusedNormAreOnByDefaultAndSwitchByName) {
  DecodeTweaks t;
  EXPECT_TRUE(t.early_weights);
  EXPECT_TRUE(t.fused_norm);
  EXPECT_TRUE(set_decode_tweak(t, "early_weights", false));
  EXPECT_FALSE(t.early_weights);
  EXPECT_TRUE(t.fused_norm);
  EXPECT_TRUE(set_decode_tweak(t, "fused_norm", false));
  EXPECT_FALSE(t.fused_norm);
  EXPECT_TRUE(set_decode_tweak(t, "early_weights", true));
  EXPECT_TRUE(t.early_weights);
  EXPECT_FALSE(set_decode_tweak(t, "early_weight", false));  // no prefix matches
  EXPECT_TRUE(t.early_weights);
}

TEST(DecodeTweaks, NamesAreUniqueAndEveryEntryIsDescribed) {
  std::set<std::string> seen;
  for (const std::string& n : decode_tweak_names()) EXPECT_TRUE(seen.insert(n).second) << "duplicate " << n;
  EXPECT_TRUE(seen.count("early_weights"));
  EXPECT_TRUE(seen.count("fused_norm"));
  for (const DecodeTweakEntry& e : kDecodeTweaks)
    if (e.name != nullptr) EXPECT_TRUE(e.what != nullptr && std::string(e.what).size() > 10) << e.name;
}

TEST(DecodeTweaks, Nvfp4VariantsAreOnByDefaultAndSwitchByName) {
  DecodeTweaks t;
  EXPECT_TRUE(t.nvfp4_early_weights && t.nvfp4_persistent_lm_head && t.nvfp4_moe_down_half_warp);
  for (const char* name : {"nvfp4_early_weights", "nvfp4_persistent_lm_head", "nvfp4_moe_down_half_warp"})
    EXPECT_TRUE(set_decode_tweak(t, name, false)) << name;
  EXPECT_FALSE(t.nvfp4_early_weights || t.nvfp4_persistent_lm_head || t.nvfp4_moe_down_half_warp);
  EXPECT_TRUE(t.early_weights) << "the BF16 switch is separate";
}

}  // namespace
}  // namespace striker::cuda
