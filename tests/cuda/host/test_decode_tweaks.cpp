// The DecodeTweaks name table (decode_tweaks.h): every variant is on by default, reachable by its
// name (what `striker bench latency --disable-tweak NAME` passes), and names are unique.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "backends/cuda/backend/decode_tweaks.h"

namespace striker::cuda {
namespace {

TEST(DecodeTweaks, NamesMatchWholeNamesOnly) {
  DecodeTweaks t;
  EXPECT_FALSE(set_decode_tweak(t, "nvfp4_early_weight", false));  // no prefix matches
  EXPECT_TRUE(t.nvfp4_early_weights);
  EXPECT_FALSE(set_decode_tweak(t, "", false));
}

TEST(DecodeTweaks, NamesAreUniqueAndEveryEntryIsDescribed) {
  std::set<std::string> seen;
  for (const std::string& n : decode_tweak_names()) EXPECT_TRUE(seen.insert(n).second) << "duplicate " << n;
  for (const DecodeTweakEntry& e : kDecodeTweaks)
    if (e.name != nullptr) EXPECT_TRUE(e.what != nullptr && std::string(e.what).size() > 10) << e.name;
}

TEST(DecodeTweaks, Nvfp4VariantsAreOnByDefaultAndSwitchByName) {
  DecodeTweaks t;
  EXPECT_TRUE(t.nvfp4_early_weights && t.nvfp4_moe_down_half_warp);
  for (const char* name : {"nvfp4_early_weights", "nvfp4_moe_down_half_warp"})
    EXPECT_TRUE(set_decode_tweak(t, name, false)) << name;
  EXPECT_FALSE(t.nvfp4_early_weights || t.nvfp4_moe_down_half_warp);
  EXPECT_TRUE(t.router_cluster && t.attention_pipeline) << "the other switches are separate";
  EXPECT_TRUE(set_decode_tweak(t, "nvfp4_early_weights", true));
  EXPECT_TRUE(t.nvfp4_early_weights && !t.nvfp4_moe_down_half_warp);
}

}  // namespace
}  // namespace striker::cuda
