#include "backends/cuda/nvfp4/nvfp4_scales.h"

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/nvfp4/nvfp4_bf16_bits.h"

namespace striker::cuda {
namespace {

// One byte per thread and trip: a load-time pass over at most a few GB, where simplicity wins.
__global__ void nvfp4_canonicalize_kernel(uint8_t* __restrict__ scales, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    scales[i] = uint8_t(nvfp4_canonical_scale(scales[i]));
}

}  // namespace

void nvfp4_canonicalize_scales(uint8_t* scales, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  const size_t blocks = (n + 255) / 256;
  nvfp4_canonicalize_kernel<<<unsigned(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(scales, n);
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_canonicalize_scales");
}

void nvfp4_upload_scales(uint8_t* dst, const uint8_t* src, size_t n) {
  STRIKER_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
  nvfp4_canonicalize_scales(dst, n, nullptr);
}

}  // namespace striker::cuda
