// cuTensorMapEncodeTiled through the runtime's driver entry point (tma_map.h).
#include "backends/cuda/common/tma_map.h"

#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/wgmma_layout.h"

namespace striker::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  // Resolved once (thread-safe static); the entry point exists from CUDA 12.0 on.
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    STRIKER_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || p == nullptr)
      throw Error("the CUDA driver has no cuTensorMapEncodeTiled (TMA needs a CUDA 12 driver)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

CUtensorMap make_tma_map_bf16_sw128(const bf16* base, int64_t rows, int64_t cols, int box_rows, const char* what) {
  auto fail = [&](const std::string& why) { throw Error(std::string(what) + ": TMA map: " + why); };
  if (base == nullptr) fail("null matrix");
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) fail("matrix base is not 16-byte aligned");
  if (rows <= 0 || cols <= 0 || cols % 8 != 0) fail("bad shape " + std::to_string(rows) + "x" + std::to_string(cols));
  if (rows > (int64_t(1) << 31) - 1 || cols > (int64_t(1) << 31) - 1) fail("matrix too large for 32-bit coordinates");
  if (box_rows <= 0 || box_rows > 256) fail("box of " + std::to_string(box_rows) + " rows (1..256)");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};   // innermost first
  const cuuint64_t strides[1] = {cuuint64_t(cols) * sizeof(bf16)};   // bytes, of dimension 1
  const cuuint32_t box[2] = {cuuint32_t(kSw128RowElems), cuuint32_t(box_rows)};  // 128 bytes inner
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(base), dims, strides,
                                    box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) fail("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(int(r)));
  return map;
}

CUtensorMap make_tma_map_u8(const uint8_t* base, int64_t rows, int64_t cols, int box_rows, int box_cols,
                            const char* what) {
  auto fail = [&](const std::string& why) { throw Error(std::string(what) + ": TMA map: " + why); };
  if (base == nullptr) fail("null matrix");
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) fail("matrix base is not 16-byte aligned");
  if (rows <= 0 || cols <= 0 || cols % 16 != 0) fail("bad shape " + std::to_string(rows) + "x" + std::to_string(cols));
  if (rows > (int64_t(1) << 31) - 1 || cols > (int64_t(1) << 31) - 1) fail("matrix too large for 32-bit coordinates");
  if (box_rows <= 0 || box_rows > 256) fail("box of " + std::to_string(box_rows) + " rows (1..256)");
  if (box_cols <= 0 || box_cols > 256 || box_cols % 16 != 0) fail("box of " + std::to_string(box_cols) + " bytes");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};  // innermost first
  const cuuint64_t strides[1] = {cuuint64_t(cols)};                 // bytes, of dimension 1
  const cuuint32_t box[2] = {cuuint32_t(box_cols), cuuint32_t(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t*>(base), dims, strides,
                                    box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) fail("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(int(r)));
  return map;
}

}  // namespace striker::cuda
