// decode_weight_bytes & co. against numbers worked out by hand from FLINT.md §1 and the tiny
// fixture config (the arithmetic is spelled out in the comments).
#include <gtest/gtest.h>

#include "model/config.h"
#include "model/weight_bytes.h"

using namespace striker;

namespace {
FlintConfig fixture(const char* name) {
  return load_flint_config(std::string(STRIKER_SHARED_DIR) + "/fixtures/flint-config/" + name);
}
}  // namespace

TEST(WeightBytes, BytesPerLinearWeight) {
  EXPECT_EQ(linear_bytes_per_weight(LinearFormat::bf16), 2.0);
  EXPECT_EQ(linear_bytes_per_weight(LinearFormat::nvfp4), 0.5625);
}

// Full Flint, batch 1:
//  attention (32+8)·128·2048 + 2048·4096 = 18,874,368 per layer × 49      =   924,844,032
//  dense MLP 3·8192·2048 = 50,331,648 × 2 layers                          =   100,663,296
//  experts 6·3·512·2048 + shared 3·512·2048 = 22,020,096 × 47 MoE layers  = 1,034,944,512
//  lm_head 151552·2048                                                    =   310,378,496
//  linear total                                                           = 2,370,830,336
//  router 47·256·2048·2 B = 49,283,072; bias 47·256·4 B = 48,128
//  norms (2·2048 + 2·128 + 32)·49 + 2048 = 216,864 floats = 867,456 B; embedding row 4,096 B
TEST(WeightBytes, FullConfigBatchOne) {
  const FlintConfig c = fixture("config.json");
  const ActiveWeights w = active_weights(c, 6);
  EXPECT_EQ(w.attention, 924844032.0);
  EXPECT_EQ(w.dense_mlp, 100663296.0);
  EXPECT_EQ(w.routed_experts + w.shared_experts, 1034944512.0);
  EXPECT_EQ(w.lm_head, 310378496.0);
  EXPECT_EQ(w.linear(), 2370830336.0);
  const double rest = 49283072.0 + 48128.0 + 867456.0 + 4096.0;
  EXPECT_EQ(decode_weight_bytes(c, LinearFormat::bf16), 4741660672.0 + rest);   // 4,791,863,424
  EXPECT_EQ(decode_weight_bytes(c, LinearFormat::nvfp4), 1333592064.0 + rest);  // 1,383,794,816
  EXPECT_EQ(decode_weight_bytes(c, LinearFormat::bf16), 4791863424.0);
  EXPECT_EQ(decode_weight_bytes(c, LinearFormat::nvfp4), 1383794816.0);
}

// Tiny config (H 256, 7 layers, 8/1 heads of 32, I 512, experts 16 × 64, top-6, 2 dense):
//  attention (8+2)·32·256 + 256·256 = 147,456 × 7 = 1,032,192
//  dense 3·512·256 × 2 = 786,432; experts (6+1)·3·64·256 = 344,064 × 5 = 1,720,320
//  lm_head 151552·256 = 38,797,312; linear 42,336,256 -> BF16 84,672,512 B, NVFP4 23,814,144 B
//  router 5·16·256·2 = 40,960 B; bias 5·16·4 = 320 B; norms ((2·256+64+8)·7 + 256)·4 = 17,376 B; row 512 B
TEST(WeightBytes, TinyConfigBatchOne) {
  const FlintConfig c = fixture("config.tiny.json");
  EXPECT_EQ(active_weights(c, 6).linear(), 42336256.0);
  EXPECT_EQ(decode_weight_bytes(c, LinearFormat::bf16), 84731680.0);
  EXPECT_EQ(decode_weight_bytes(c, LinearFormat::nvfp4), 23873312.0);
}

TEST(WeightBytes, DistinctExpertsAndBatches) {
  const FlintConfig c = fixture("config.json");
  EXPECT_DOUBLE_EQ(expected_distinct_experts(c, 1), 6.0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(c, 2), 256.0 - 250.0 * 250.0 / 256.0);  // 11.859375
  EXPECT_GT(expected_distinct_experts(c, 4096), 255.99);
  EXPECT_LE(expected_distinct_experts(c, 4096), 256.0);
  // Batch 1 through the batch formula is the batch-1 number.
  EXPECT_DOUBLE_EQ(batch_decode_weight_bytes(c, LinearFormat::nvfp4, 1), decode_weight_bytes(c, LinearFormat::nvfp4));
  // Batch 2: 5.859375 more experts per MoE layer (47 layers of 3·512·2048 BF16 weights) and one more row.
  const double more = (256.0 - 250.0 * 250.0 / 256.0 - 6.0) * 47 * 3 * 512 * 2048 * 2 + 2048 * 2;
  EXPECT_NEAR(batch_decode_weight_bytes(c, LinearFormat::bf16, 2) - decode_weight_bytes(c, LinearFormat::bf16), more, 1.0);
}

// KV: 14 full layers read context+1 keys, 35 sliding layers at most 513; 4·128·2·2 = 2048 B a key.
TEST(WeightBytes, DecodeKvBytes) {
  const FlintConfig full = fixture("config.json");
  EXPECT_EQ(decode_kv_bytes(full, 100000), (14.0 * 100001 + 35.0 * 513) * 2048);
  EXPECT_EQ(decode_kv_bytes(full, 0), 49.0 * 2048);
  const FlintConfig tiny = fixture("config.tiny.json");  // 2 full + 5 sliding (window 17), 128 B a key
  EXPECT_EQ(decode_kv_bytes(tiny, 10), 77.0 * 128);
  EXPECT_EQ(decode_kv_bytes(tiny, 100), (2.0 * 101 + 5.0 * 17) * 128);
}
