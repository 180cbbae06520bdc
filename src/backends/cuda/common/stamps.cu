// Host side of the per-CTA stamps (stamps.cuh, stamps.h): built only with -DSTRIKER_STAMPS=ON.
#include "backends/cuda/common/stamps.h"

#ifdef STRIKER_STAMPS
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/stamps.cuh"

namespace striker::cuda {
namespace {
stamps::Buffer g_host_buffer;  // the profiling build's one buffer (stamps.cuh says why a global)
std::string g_path;
}  // namespace

void stamps_begin() {
  const char* path = std::getenv("STRIKER_STAMPS");
  if (path == nullptr || *path == 0 || g_host_buffer.rec != nullptr) return;
  g_path = path;
  const char* cap = std::getenv("STRIKER_STAMPS_CAP");
  g_host_buffer.cap = cap != nullptr ? unsigned(std::strtoul(cap, nullptr, 10)) : (1u << 21);
  STRIKER_CUDA_CHECK(cudaMalloc(&g_host_buffer.rec, size_t(g_host_buffer.cap) * stamps::kWords * 8));
  STRIKER_CUDA_CHECK(cudaMalloc(&g_host_buffer.count, sizeof(unsigned)));
  STRIKER_CUDA_CHECK(cudaMemset(g_host_buffer.count, 0, sizeof(unsigned)));
  for (stamps::Setter set : stamps::setters()) set(g_host_buffer);
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  std::fprintf(stderr, "stamps: recording %u records into %s (%zu stamped units)\n", g_host_buffer.cap, path,
               stamps::setters().size());
}

void stamps_end() {
  if (g_host_buffer.rec == nullptr) return;
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  unsigned count = 0;
  STRIKER_CUDA_CHECK(cudaMemcpy(&count, g_host_buffer.count, sizeof count, cudaMemcpyDeviceToHost));
  const unsigned n = count < g_host_buffer.cap ? count : g_host_buffer.cap;
  std::vector<unsigned long long> rec(size_t(n) * stamps::kWords);
  STRIKER_CUDA_CHECK(cudaMemcpy(rec.data(), g_host_buffer.rec, rec.size() * 8, cudaMemcpyDeviceToHost));
  const stamps::Buffer off{};
  for (stamps::Setter set : stamps::setters()) set(off);
  cudaFree(g_host_buffer.rec);
  cudaFree(g_host_buffer.count);
  g_host_buffer = off;
  std::FILE* f = std::fopen(g_path.c_str(), "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "stamps: cannot write %s\n", g_path.c_str());
    return;
  }
  const unsigned head[2] = {unsigned(stamps::kWords), n};
  std::fwrite(head, sizeof head, 1, f);
  std::fwrite(rec.data(), 8, rec.size(), f);
  std::fclose(f);
  std::fprintf(stderr, "stamps: %u of %u records written to %s\n", n, count, g_path.c_str());
}

}  // namespace striker::cuda
#endif  // STRIKER_STAMPS
