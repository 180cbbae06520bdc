// Device side of CudaNvfp4.PairDecodeMatchesHostOnEveryByteAndScale: the decode the tensor-core
// NVFP4 kernels run (nvfp4_bf16_bits.h), on the device, so mul.rn.bf16x2's handling of the bf16
// subnormal E2M1 0.5 pattern is checked by the hardware, not by the host model of it; likewise the
// two-byte scale decode, whose E4M3 subnormals are bf16 subnormals before the first multiply.
#include "backends/cuda/nvfp4/nvfp4_bf16_bits.h"
#include "nvfp4_pair_probe.h"

namespace striker::cuda::testing {
namespace {

__global__ void nvfp4_pair_probe_kernel(uint32_t* out) {
  const uint32_t b = blockIdx.x, v = threadIdx.x;
  const uint32_t w = v * 0x01010101u, sc = ue4m3_bf16x2_x2p118_bits(b);
  uint32_t* o = out + (size_t(b) * 256 + v) * 4;
  o[0] = nvfp4_pair_bf16<0>(w, sc);
  o[1] = nvfp4_pair_bf16<1>(w, sc);
  o[2] = nvfp4_pair_bf16<2>(w, sc);
  o[3] = nvfp4_pair_bf16<3>(w, sc);
}

__global__ void nvfp4_scale_pair_probe_kernel(uint32_t* out) {
  const uint32_t s = blockIdx.x * 256u + threadIdx.x;
  ue4m3x2_bf16x2_x2p118_bits(s | 0xA5A50000u, out[2 * s], out[2 * s + 1]);
}

}  // namespace

void nvfp4_pair_probe(uint32_t* out) { nvfp4_pair_probe_kernel<<<256, 256>>>(out); }
void nvfp4_scale_pair_probe(uint32_t* out) { nvfp4_scale_pair_probe_kernel<<<256, 256>>>(out); }

}  // namespace striker::cuda::testing
