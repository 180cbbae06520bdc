#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "model/nvfp4.h"

using namespace striker;

namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

TEST(Nvfp4, ScaleBytesKnownValues) {
  EXPECT_EQ(nvfp4::ue4m3_value(0x38), 1.0f);
  EXPECT_EQ(nvfp4::ue4m3_value(0x7E), 448.0f);
  EXPECT_EQ(nvfp4::ue4m3_value(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(nvfp4::ue4m3_value(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(nvfp4::ue4m3_value(0x7F), 0.0f);
  EXPECT_EQ(nvfp4::ue4m3_value(0x00), 0.0f);
}

TEST(Nvfp4, EveryScaleByteRoundTripsThroughTheEncoder) {
  for (int b = 1; b < 0x7F; ++b) {
    float v = nvfp4::ue4m3_value(uint8_t(b));
    EXPECT_EQ(nvfp4::ue4m3_from_float(v), b) << "byte " << b << " value " << v;
  }
}

// formats.md §4.3: sub-block codes c_i = i -> ggml qs 80 91 A2 B3 C4 D5 E6 F7, NVIDIA 10 32 ... FE.
TEST(Nvfp4, ReferenceTestVector) {
  uint8_t block[36] = {0x38, 0x38, 0x38, 0x38};
  const uint8_t ggml_qs[8] = {0x80, 0x91, 0xA2, 0xB3, 0xC4, 0xD5, 0xE6, 0xF7};
  for (int s = 0; s < 4; ++s) std::memcpy(block + 4 + 8 * s, ggml_qs, 8);
  uint8_t codes[32], scales[4];
  nvfp4::ggml_row_to_split(block, 64, codes, scales);
  const uint8_t nv[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE};
  for (int s = 0; s < 4; ++s)
    for (int t = 0; t < 8; ++t) EXPECT_EQ(codes[8 * s + t], nv[t]) << s << "," << t;
  uint8_t back[36];
  nvfp4::split_row_to_ggml(codes, scales, 64, back);
  EXPECT_EQ(std::memcmp(back, block, 36), 0);
  float w[64];
  nvfp4::dequantize_ggml_row(block, 64, 1.0f, w);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(w[i], nvfp4::e2m1_value(uint8_t(i)));
}

// Random blocks (every scale byte 0..255 appears) against the independent Python reference and
// gguf-py's dequantiser: dequantisation and the split layout must agree bit for bit.
TEST(Nvfp4, MatchesIndependentPythonAndGgufPy) {
  const int64_t rows = 37, in = 64 * 9;
  std::mt19937 rng(std::random_device{}());
  std::vector<uint8_t> blocks(size_t(rows * nvfp4::ggml_row_bytes(in)));
  for (auto& b : blocks) b = uint8_t(rng());
  for (int v = 0; v < 256; ++v) blocks[size_t(v / 4) * 36 + size_t(v % 4)] = uint8_t(v);  // all scale bytes
  const float scale2 = 0.0123f;

  auto dir = std::filesystem::temp_directory_path() / ("nvfp4_" + std::to_string(rng()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir / "blocks.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(blocks.data()), std::streamsize(blocks.size()));
  }
  std::string cmd = "python3 " STRIKER_SOURCE_DIR "/tests/python/nvfp4_reference.py " + (dir / "blocks.bin").string() +
                    " " + std::to_string(in) + " 0.0123 " + (dir / "out").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  std::vector<float> ours(size_t(rows * in), NAN);
  std::vector<uint8_t> codes(size_t(rows * in / 2)), scales(size_t(rows * in / 16));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = blocks.data() + r * nvfp4::ggml_row_bytes(in);
    nvfp4::dequantize_ggml_row(row, in, scale2, ours.data() + r * in);
    nvfp4::ggml_row_to_split(row, in, codes.data() + r * in / 2, scales.data() + r * in / 16);
  }
  for (const char* which : {"ref", "gguf"}) {
    auto ref = read_bytes(dir / (std::string("out.") + which + ".f32"));
    ASSERT_EQ(ref.size(), ours.size() * 4) << which;
    for (size_t i = 0; i < ours.size(); ++i) {
      float r;
      std::memcpy(&r, ref.data() + 4 * i, 4);
      // Bit-exact, except that -0 and +0 are the same weight.
      if (r == 0.0f && ours[i] == 0.0f) continue;
      ASSERT_EQ(bits_of(ours[i]), bits_of(r)) << which << " element " << i << ": " << ours[i] << " vs " << r;
    }
  }
  EXPECT_EQ(read_bytes(dir / "out.codes"), codes);
  EXPECT_EQ(read_bytes(dir / "out.scales"), scales);

  // Lossless both ways.
  std::vector<uint8_t> back(blocks.size());
  for (int64_t r = 0; r < rows; ++r)
    nvfp4::split_row_to_ggml(codes.data() + r * in / 2, scales.data() + r * in / 16, in,
                             back.data() + r * nvfp4::ggml_row_bytes(in));
  EXPECT_EQ(back, blocks);
  std::filesystem::remove_all(dir);
}

TEST(Nvfp4, QuantizerIsCloseAndIdempotentOnItsOwnGrid) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t in = 256;
  std::vector<float> x(in);
  for (auto& v : x) v = normal(rng);
  float amax = 0;
  for (float v : x) amax = std::fmax(amax, std::fabs(v));
  float scale2 = nvfp4::global_scale_for_amax(amax);
  std::vector<float> scaled(in);
  for (int64_t i = 0; i < in; ++i) scaled[size_t(i)] = x[size_t(i)] / scale2;
  std::vector<uint8_t> blocks(size_t(nvfp4::ggml_row_bytes(in)));
  nvfp4::quantize_row_to_ggml(scaled.data(), in, blocks.data());
  std::vector<float> y(in);
  nvfp4::dequantize_ggml_row(blocks.data(), in, scale2, y.data());
  double err = 0, norm = 0;
  for (int64_t i = 0; i < in; ++i) {
    err += (x[size_t(i)] - y[size_t(i)]) * (x[size_t(i)] - y[size_t(i)]);
    norm += x[size_t(i)] * x[size_t(i)];
  }
  EXPECT_LT(std::sqrt(err / norm), 0.15);  // 4-bit: ~10% relative RMS error on Gaussians
  // Re-quantising the dequantised weights gives the same blocks (the grid is a fixed point).
  std::vector<float> again(in);
  for (int64_t i = 0; i < in; ++i) again[size_t(i)] = y[size_t(i)] / scale2;
  std::vector<uint8_t> blocks2(blocks.size());
  nvfp4::quantize_row_to_ggml(again.data(), in, blocks2.data());
  std::vector<float> y2(in);
  nvfp4::dequantize_ggml_row(blocks2.data(), in, scale2, y2.data());
  EXPECT_EQ(y, y2);
}

// nearest_code takes the two grid points around |v| instead of trying every code: it must be the
// exhaustive search's first minimum for every scale byte, on grid points, midpoints and their
// float neighbours, signed zeros, values far off the grid, NaN and infinities.
TEST(Nvfp4, NearestCodeIsTheExhaustiveSearchsFirstMinimum) {
  auto exhaustive = [](float v, float d) {
    uint8_t best = 0;
    float best_err = INFINITY;
    for (uint8_t c = 0; c < 16; ++c) {
      float err = std::fabs(nvfp4::e2m1_value(c) * d - v);
      if (err < best_err) {
        best_err = err;
        best = c;
      }
    }
    return best;
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  int64_t checked = 0, mismatches = 0;
  auto check = [&](float v, float d) {
    ++checked;
    if (nvfp4::nearest_code(v, d) != exhaustive(v, d) && ++mismatches <= 5)
      ADD_FAILURE() << "v " << v << " d " << d << ": " << int(nvfp4::nearest_code(v, d)) << " vs "
                    << int(exhaustive(v, d));
  };
  for (int byte = 0; byte < 256; ++byte) {
    const float d = nvfp4::ue4m3_value(uint8_t(byte));
    for (int k = 0; k < 8; ++k)
      for (float p : {kMag[k] * d, k < 7 ? (kMag[k] + kMag[k + 1]) / 2 * d : 7.0f * d}) {
        for (float q : {p, std::nextafter(p, 0.0f), std::nextafter(p, INFINITY)}) {
          check(q, d);
          check(-q, d);
        }
      }
    for (int i = 0; i < 400; ++i) check(unit(rng) * 7.0f * d, d);
    for (int i = 0; i < 50; ++i) check(unit(rng) * 1e3f * (d + 1e-30f), d);  // far beyond the grid
    for (float v : {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f, -1e-40f, 3e38f}) check(v, d);
  }
  for (float d : {1e-30f, 1e30f, 1e-42f, INFINITY, NAN})
    for (float v : {0.0f, 1.0f, -2.5f, 1e-35f, -1e35f}) check(v, d);
  EXPECT_EQ(mismatches, 0) << "of " << checked;
}
