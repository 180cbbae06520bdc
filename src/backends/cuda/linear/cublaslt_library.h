// cuBLASLt, opened with dlopen when the CUDA backend builds its GEMM object instead of linked into
// the binary: loading libcublasLt runs initialisers that touch ~100 MB (~0.1 s of CPU), which every
// striker command paid at start, the CPU-only ones (tokenize, quantize, serve --device cpu) included.
#pragma once
#include <cublasLt.h>

namespace striker::cuda {

class CublasLtLibrary {
 public:
  // Opens libcublasLt.so.<CUDA major> (the loader's search path, then the toolkit's library
  // folder this build was made with). Throws striker::Error naming the library and the reason.
  CublasLtLibrary();
  ~CublasLtLibrary();
  CublasLtLibrary(const CublasLtLibrary&) = delete;
  CublasLtLibrary& operator=(const CublasLtLibrary&) = delete;

  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic = nullptr;
  decltype(&::cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set_attribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set_attribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;

 private:
  void* handle_ = nullptr;
};

}  // namespace striker::cuda
