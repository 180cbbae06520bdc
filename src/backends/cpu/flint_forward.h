// One step of the Flint forward pass on the CPU (FLINT.md §4).
#pragma once
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_model.h"
#include "backends/cpu/kv_cache.h"
#include "core/thread_pool.h"

namespace striker::cpu {

// Runs every chunk of `batch` through the model, writing their K/V into `cache`, and fills
// `logits` as Backend::forward documents. Bad input (token id, position, block table) throws
// striker::Error before anything is computed.
void flint_forward(const CpuModel& model, KvCache& cache, ThreadPool& pool, const ForwardBatch& batch,
                   std::vector<float>& logits);

// The same step, handing the logits to `sink` in blocks of at most max_block_rows rows
// (Backend::forward_streamed): the final norm and lm_head run per block, so only one block of
// [rows, vocab] exists at a time.
void flint_forward_streamed(const CpuModel& model, KvCache& cache, ThreadPool& pool, const ForwardBatch& batch,
                            int64_t max_block_rows, const LogitsSink& sink);

}  // namespace striker::cpu
