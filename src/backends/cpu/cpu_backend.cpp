#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/cpu_model.h"
#include "backends/cpu/flint_forward.h"
#include "backends/cpu/kv_cache.h"
#include "core/thread_pool.h"

namespace striker {

namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const LoadedModel& model, int threads) : model_(model), cache_(model.config), pool_(threads) {}

  std::string name() const override { return "cpu"; }
  int64_t full_block_bytes(int32_t block_size) const override { return cache_.full_block_bytes(block_size); }
  int64_t sliding_block_bytes(int32_t block_size) const override { return cache_.sliding_block_bytes(block_size); }
  void allocate_kv_cache(const KvCacheSpec& spec) override { cache_.allocate(spec); }
  void forward(const ForwardBatch& batch, std::vector<float>& logits) override {
    cpu::flint_forward(model_, cache_, pool_, batch, logits);
  }
  void forward_streamed(const ForwardBatch& batch, int64_t max_block_rows, const LogitsSink& sink) override {
    cpu::flint_forward_streamed(model_, cache_, pool_, batch, max_block_rows, sink);
  }

 private:
  cpu::CpuModel model_;
  cpu::KvCache cache_;
  ThreadPool pool_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, int threads) {
  return std::make_unique<CpuBackend>(model, threads);
}

}  // namespace striker
