// Test-only launcher of nvfp4_pair_probe.cu: the device's own tensor-core NVFP4 decode.
#pragma once
#include <cstdint>

namespace striker::cuda::testing {

// out[(b·256 + v)·4 + K] = nvfp4_pair_bf16<K>(v·0x01010101, ue4m3_bf16x2_x2p118_bits(b)) for every
// scale byte b and code byte v, computed on the device; out: 256·256·4 words on the device.
void nvfp4_pair_probe(uint32_t* out);

// out[2s], out[2s + 1] = the lo, hi of ue4m3x2_bf16x2_x2p118_bits(s | 0xA5A50000) for every 16-bit s,
// computed on the device; out: 2·65536 words on the device.
void nvfp4_scale_pair_probe(uint32_t* out);

}  // namespace striker::cuda::testing
