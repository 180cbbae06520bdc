// cuBLASLt is opened at run time (linear/cublaslt_library.h), not linked: the library must be found
// where this build's toolkit put it and every entry point LtGemm calls must bind. No GPU is needed to
// open a library, so CI checks what a GPU machine would otherwise find out first.
#include <gtest/gtest.h>

#include <memory>

#include "backends/cuda/linear/cublaslt_library.h"

using striker::cuda::CublasLtLibrary;

TEST(CublasLtLibrary, OpensAndBindsEveryEntryPoint) {
  CublasLtLibrary lt;
  const void* fns[] = {reinterpret_cast<const void*>(lt.create),
                       reinterpret_cast<const void*>(lt.destroy),
                       reinterpret_cast<const void*>(lt.matmul),
                       reinterpret_cast<const void*>(lt.algo_get_heuristic),
                       reinterpret_cast<const void*>(lt.desc_create),
                       reinterpret_cast<const void*>(lt.desc_destroy),
                       reinterpret_cast<const void*>(lt.desc_set_attribute),
                       reinterpret_cast<const void*>(lt.preference_create),
                       reinterpret_cast<const void*>(lt.preference_destroy),
                       reinterpret_cast<const void*>(lt.preference_set_attribute),
                       reinterpret_cast<const void*>(lt.layout_create),
                       reinterpret_cast<const void*>(lt.layout_destroy)};
  for (const void* f : fns) EXPECT_NE(f, nullptr);
  // A layout needs no device: create and destroy one through the bound pointers.
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(lt.layout_create(&layout, CUDA_R_16BF, 64, 32, 64), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(lt.layout_destroy(layout), CUBLAS_STATUS_SUCCESS);
}

TEST(CublasLtLibrary, TwoOpenAtOnceAndCloseIndependently) {
  auto a = std::make_unique<CublasLtLibrary>();
  CublasLtLibrary b;
  a.reset();  // dlclose of one handle leaves the other's pointers valid (the loader counts references)
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(b.layout_create(&layout, CUDA_R_32F, 8, 8, 8), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(b.layout_destroy(layout), CUBLAS_STATUS_SUCCESS);
}
