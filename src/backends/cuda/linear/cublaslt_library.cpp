#include "backends/cuda/linear/cublaslt_library.h"

#include <dlfcn.h>

#include <string>

#include "core/error.h"

namespace striker::cuda {
namespace {

const std::string kSoname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);

template <class F>
void bind(void* handle, F& fn, const char* symbol) {
  fn = reinterpret_cast<F>(dlsym(handle, symbol));
  if (!fn) throw Error("cuBLASLt: " + kSoname + " has no symbol " + symbol);
}

}  // namespace

CublasLtLibrary::CublasLtLibrary() {
  handle_ = dlopen(kSoname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = handle_ ? "" : dlerror();
#ifdef STRIKER_CUDA_LIBRARY_DIR
  if (!handle_) {
    const std::string path = std::string(STRIKER_CUDA_LIBRARY_DIR) + "/" + kSoname;
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) why += "; " + std::string(dlerror());
  }
#endif
  if (!handle_)
    throw Error("cuBLASLt: cannot load " + kSoname + " (" + why +
                "): the CUDA backend needs the CUDA toolkit's cuBLASLt on the library path (LD_LIBRARY_PATH)");
  try {
    bind(handle_, create, "cublasLtCreate");
    bind(handle_, destroy, "cublasLtDestroy");
    bind(handle_, matmul, "cublasLtMatmul");
    bind(handle_, algo_get_heuristic, "cublasLtMatmulAlgoGetHeuristic");
    bind(handle_, desc_create, "cublasLtMatmulDescCreate");
    bind(handle_, desc_destroy, "cublasLtMatmulDescDestroy");
    bind(handle_, desc_set_attribute, "cublasLtMatmulDescSetAttribute");
    bind(handle_, preference_create, "cublasLtMatmulPreferenceCreate");
    bind(handle_, preference_destroy, "cublasLtMatmulPreferenceDestroy");
    bind(handle_, preference_set_attribute, "cublasLtMatmulPreferenceSetAttribute");
    bind(handle_, layout_create, "cublasLtMatrixLayoutCreate");
    bind(handle_, layout_destroy, "cublasLtMatrixLayoutDestroy");
  } catch (...) {
    dlclose(handle_);
    throw;
  }
}

CublasLtLibrary::~CublasLtLibrary() {
  if (handle_) dlclose(handle_);
}

}  // namespace striker::cuda
