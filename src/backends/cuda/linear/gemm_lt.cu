#include "backends/cuda/linear/gemm_lt.h"

#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/linear/cublaslt_library.h"

namespace striker::cuda {
namespace {

void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLASLt ") + what + " failed with status " + std::to_string(int(s)));
}

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

}  // namespace

struct LtGemm::Plan {
  explicit Plan(const CublasLtLibrary& l) : lt(l) {}
  const CublasLtLibrary& lt;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) lt.layout_destroy(a);
    if (b) lt.layout_destroy(b);
    if (c) lt.layout_destroy(c);
    if (op) lt.desc_destroy(op);
  }
};

LtGemm::LtGemm()
    : lt_(std::make_unique<CublasLtLibrary>()),
      plans_(kPlansPerKind),
      scaled_plans_(kPlansPerKind),
      f32_plans_(kPlansPerKind) {
  cublasLtHandle_t h = nullptr;
  lt_check(lt_->create(&h), "create");
  handle_ = h;
  workspace_bytes_ = kWorkspaceBytes;
  STRIKER_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

LtGemm::~LtGemm() {
  plans_.clear();
  scaled_plans_.clear();
  f32_plans_.clear();
  if (workspace_) cudaFree(workspace_);
  if (handle_) lt_->destroy(static_cast<cublasLtHandle_t>(handle_));
}

// Column-major view: out^T [out_dim, T] = W^T' … i.e. C(m=out_dim, n=T) = op(A)·B with
// A = W seen as col-major [in, out_dim] (transposed by the op) and B = x as col-major [in, T].
// `ld_out` is C's leading dimension; `align16` tells the heuristics the pointers are only 16-byte
// aligned (column blocks of q|k|v and LM-head chunks start at any multiple of 8 columns).
// `f32_out`: C and D in fp32 (the accumulator as it is) instead of bf16.
std::unique_ptr<LtGemm::Plan> LtGemm::make_plan(int T, int in, int out_dim, int ld_out, bool align16, bool f32_out) {
  auto p = std::make_unique<Plan>(*lt_);
  lt_check(lt_->desc_create(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  lt_check(lt_->desc_set_attribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
  lt_check(lt_->desc_set_attribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
  lt_check(lt_->layout_create(&p->a, CUDA_R_16BF, uint64_t(in), uint64_t(out_dim), int64_t(in)), "layout A");
  lt_check(lt_->layout_create(&p->b, CUDA_R_16BF, uint64_t(in), uint64_t(T), int64_t(in)), "layout B");
  lt_check(lt_->layout_create(&p->c, f32_out ? CUDA_R_32F : CUDA_R_16BF, uint64_t(out_dim), uint64_t(T),
                              int64_t(ld_out)),
           "layout C");
  cublasLtMatmulPreference_t pref = nullptr;
  lt_check(lt_->preference_create(&pref), "preference");
  lt_check(lt_->preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                         sizeof workspace_bytes_),
           "workspace preference");
  if (align16) {
    const uint32_t align = 16;
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      lt_check(lt_->preference_set_attribute(pref, attr, &align, sizeof align), "alignment preference");
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t s = lt_->algo_get_heuristic(static_cast<cublasLtHandle_t>(handle_), p->op, p->a, p->b,
                                                   p->c, p->c, pref, 1, &result, &found);
  lt_->preference_destroy(pref);
  lt_check(s, "algorithm heuristic");
  if (found == 0)
    throw Error(std::string("cuBLASLt has no bf16 GEMM algorithm (") + (f32_out ? "fp32" : "bf16") +
                " output) for T=" + std::to_string(T) + " in=" + std::to_string(in) +
                " out=" + std::to_string(out_dim) + " ld_out=" + std::to_string(ld_out));
  p->algo = result.algo;
  return p;
}

void LtGemm::gemm_bf16(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* out, cudaStream_t stream) {
  if (T <= 0 || out_dim <= 0) return;
  if (in <= 0) throw Error("gemm_bf16: input width must be positive, got " + std::to_string(in));
  Plan& p = *plans_.get_or_make({T, in, out_dim}, [&] { return make_plan(T, in, out_dim, out_dim, false); });
  const float alpha = 1.f, beta = 0.f;
  lt_check(lt_->matmul(static_cast<cublasLtHandle_t>(handle_), p.op, &alpha, W, p.a, x, p.b, &beta, out, p.c, out,
                       p.c, &p.algo, workspace_, workspace_bytes_, stream),
           "matmul");
}

void LtGemm::gemm_bf16_scaled(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* out, int ld_out,
                              float alpha, cudaStream_t stream) {
  if (T <= 0 || out_dim <= 0) return;
  if (in <= 0 || ld_out < out_dim)
    throw Error("gemm_bf16_scaled: bad shape in=" + std::to_string(in) + " out=" + std::to_string(out_dim) +
                " ld_out=" + std::to_string(ld_out));
  for (const void* ptr : {static_cast<const void*>(x), static_cast<const void*>(W), static_cast<const void*>(out)})
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) throw Error("gemm_bf16_scaled: pointers must be 16-byte aligned");
  Plan& p =
      *scaled_plans_.get_or_make({T, in, out_dim, ld_out}, [&] { return make_plan(T, in, out_dim, ld_out, true); });
  const float beta = 0.f;
  lt_check(lt_->matmul(static_cast<cublasLtHandle_t>(handle_), p.op, &alpha, W, p.a, x, p.b, &beta, out, p.c, out,
                       p.c, &p.algo, workspace_, workspace_bytes_, stream),
           "matmul");
}

void LtGemm::gemm_bf16_f32out(const bf16* x, int T, int in, const bf16* W, int out_dim, float* out,
                              cudaStream_t stream) {
  if (T <= 0 || out_dim <= 0) return;
  if (in <= 0) throw Error("gemm_bf16_f32out: input width must be positive, got " + std::to_string(in));
  for (const void* ptr : {static_cast<const void*>(x), static_cast<const void*>(W), static_cast<const void*>(out)})
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) throw Error("gemm_bf16_f32out: pointers must be 16-byte aligned");
  Plan& p = *f32_plans_.get_or_make({T, in, out_dim}, [&] { return make_plan(T, in, out_dim, out_dim, true, true); });
  const float alpha = 1.f, beta = 0.f;
  lt_check(lt_->matmul(static_cast<cublasLtHandle_t>(handle_), p.op, &alpha, W, p.a, x, p.b, &beta, out, p.c, out,
                       p.c, &p.algo, workspace_, workspace_bytes_, stream),
           "matmul");
}

}  // namespace striker::cuda
