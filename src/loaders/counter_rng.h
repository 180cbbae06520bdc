// A counter-based normal generator for random checkpoints: value i of a stream depends only on
// (key, i), so tensors can be filled in parallel chunks and the result is the same on every
// machine and thread count. splitmix64 mixes the counter; Box–Muller turns each 64-bit draw
// into two standard normals.
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

namespace striker {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Stream key for one named tensor: independent of tensor order and of sharding.
inline uint64_t stream_key(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the name
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return splitmix64(splitmix64(seed) ^ h);
}

// Normals 2*pair and 2*pair+1 of stream `key`.
inline void normal_pair(uint64_t key, uint64_t pair, float& z0, float& z1) {
  const uint64_t r = splitmix64(key + pair);
  // Two 24-bit uniforms; u1 in (0, 1] so the log is finite.
  const float u1 = (float((r >> 40) & 0xffffff) + 1.0f) * (1.0f / 16777216.0f);
  const float u2 = float(r & 0xffffff) * (1.0f / 16777216.0f);
  const float radius = std::sqrt(-2.0f * std::log(u1));
  const float angle = 6.28318530717958647692f * u2;
  z0 = radius * std::cos(angle);
  z1 = radius * std::sin(angle);
}

}  // namespace striker
