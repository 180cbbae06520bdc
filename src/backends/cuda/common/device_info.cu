#include "backends/cuda/common/device_info.h"

#include <cuda_runtime.h>

#include <cstdio>

namespace striker::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::string device_summary() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(err);
  }
  if (n == 0) return "no CUDA device";
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor,
                p.multiProcessorCount, double(p.totalGlobalMem) / (1024.0 * 1024 * 1024));
  return buf;
}

double device_dram_peak_bytes_per_s() {
  if (device_count() == 0) return 0.0;
  int clock_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0) != cudaSuccess) {
    cudaGetLastError();
    return 0.0;
  }
  return 2.0 * double(clock_khz) * 1e3 * double(bus_bits) / 8.0;
}

bool device_memory(size_t& free_bytes, size_t& total_bytes) {
  if (device_count() == 0) return false;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace striker::cuda
