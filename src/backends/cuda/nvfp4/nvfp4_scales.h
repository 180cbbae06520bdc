// The device copy of an NVFP4 matrix's scale bytes is canonical: the E4M3 NaN byte 0x7F, which the
// codec (model/nvfp4.cpp ue4m3_value) decodes as 0, is stored as 0x00 — the same value — and every
// other byte as it is. So the tensor-core kernels decode two scale bytes at once without testing
// either for 0x7F (nvfp4_bf16_bits.h ue4m3x2_bf16x2_x2p118_bits). Every path that puts scales on the
// device makes them canonical: the loader's copy (nvfp4_upload_scales, device_model.cpp) and the dummy
// weights (nvfp4_fill_random stores a drawn 0x7F as 0x00).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace striker::cuda {

// Copies n scale bytes from host memory to the device and canonicalises them there (both on the
// legacy default stream, so they are ordered with later synchronous copies and launches).
void nvfp4_upload_scales(uint8_t* dst, const uint8_t* src, size_t n);

// Replaces every 0x7F among n device bytes by 0x00 (any alignment and length).
void nvfp4_canonicalize_scales(uint8_t* scales, size_t n, cudaStream_t stream);

}  // namespace striker::cuda
