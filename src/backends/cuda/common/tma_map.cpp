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

// A row-major [rows, cols] matrix of `elem_bytes`-byte elements (cols a multiple of
// `col_multiple`, base 16-byte aligned) read in boxes of box_rows × box_cols elements.
struct Tiled2d {
  const void* base;
  int64_t rows, cols;
  int elem_bytes, col_multiple, box_rows, box_cols;
  CUtensorMapDataType type;
  CUtensorMapSwizzle swizzle;
};

CUtensorMap encode_2d(const Tiled2d& m, const char* what) {
  auto fail = [&](const std::string& why) { throw Error(std::string(what) + ": TMA map: " + why); };
  if (m.base == nullptr) fail("null matrix");
  if (reinterpret_cast<uintptr_t>(m.base) % 16 != 0) fail("matrix base is not 16-byte aligned");
  if (m.rows <= 0 || m.cols <= 0 || m.cols % m.col_multiple != 0)
    fail("bad shape " + std::to_string(m.rows) + "x" + std::to_string(m.cols));
  if (m.rows > (int64_t(1) << 31) - 1 || m.cols > (int64_t(1) << 31) - 1)
    fail("matrix too large for 32-bit coordinates");
  if (m.box_rows <= 0 || m.box_rows > 256) fail("box of " + std::to_string(m.box_rows) + " rows (1..256)");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cuuint64_t(m.cols), cuuint64_t(m.rows)};        // innermost first
  const cuuint64_t strides[1] = {cuuint64_t(m.cols) * cuuint64_t(m.elem_bytes)};  // bytes, of dimension 1
  const cuuint32_t box[2] = {cuuint32_t(m.box_cols), cuuint32_t(m.box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, m.type, 2, const_cast<void*>(m.base), dims, strides, box, elem_strides,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, m.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) fail("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(int(r)));
  return map;
}

}  // namespace

CUtensorMap make_tma_map_bf16_sw128(const bf16* base, int64_t rows, int64_t cols, int box_rows, const char* what) {
  // 128-byte inner box (kSw128RowElems bf16), the 128B swizzle of wgmma_layout.h.
  return encode_2d(Tiled2d{base, rows, cols, int(sizeof(bf16)), 8, box_rows, kSw128RowElems,
                           CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_SWIZZLE_128B},
                   what);
}

CUtensorMap make_tma_map_u8(const uint8_t* base, int64_t rows, int64_t cols, int box_rows, int box_cols,
                            const char* what) {
  if (box_cols <= 0 || box_cols > 256 || box_cols % 16 != 0)
    throw Error(std::string(what) + ": TMA map: box of " + std::to_string(box_cols) + " bytes");
  return encode_2d(
      Tiled2d{base, rows, cols, 1, 16, box_rows, box_cols, CU_TENSOR_MAP_DATA_TYPE_UINT8, CU_TENSOR_MAP_SWIZZLE_NONE},
      what);
}

}  // namespace striker::cuda
