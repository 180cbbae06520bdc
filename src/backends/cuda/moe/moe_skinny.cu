// Routed experts of decode steps as skinny tensor-core GEMMs (moe_skinny.h).
#include "backends/cuda/moe/moe_skinny.h"

#include <algorithm>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/linear/skinny_bf16.cuh"
#include "backends/cuda/nvfp4/nvfp4_skinny.cuh"

namespace striker::cuda {
namespace {

// grid.y = the routing's tile slots (moe_max_tiles), plus one for a shared expert; slot i works on
// tile i, slots past *num_tiles have nothing to do, and the last slot (with a shared expert) works
// on the Job's `alt` operands. Which expert a tile reads is known only after the sort, so no
// weight load is issued before griddepcontrol.wait. kGather: activation rows are the tokens of the
// sorted rows (gate/up reads x); otherwise the sorted rows themselves (down reads act_sorted).
template <bool kGather, class Wt>
struct SkinnyMoeJob {
  static constexpr bool kWeightsBeforeWait = false;
  static constexpr bool kHasAlt = true;
  const MoeTile* tiles;
  const int32_t* num_tiles;
  const int32_t* sorted_slot;
  int K;
  int rows_per_expert;              // weight rows of one expert's matrix (inter for gate/up, hidden for down)
  const float* scale2_a = nullptr;  // NVFP4: per-expert scale2 of gate (or down) ...
  const float* scale2_b = nullptr;  // ... and of up (gate/up only)
  bool has_alt = false;             // the shared expert, on tokens 0..tokens-1
  int tokens = 0;
  SkinnyOperands<Wt> alt{};
  float alt_scale_a = 1.f, alt_scale_b = 1.f;  // NVFP4: the shared expert's scale2 (as scale2_a / _b)
  __device__ SkinnyWork work(int g) const {
    SkinnyWork w;
    if (has_alt && blockIdx.y == gridDim.y - 1) {
      w.alt = true;
      w.nt = tokens;
      w.x_row = min(g, tokens - 1);
      return w;
    }
    if (int(blockIdx.y) >= *num_tiles) {
      w.live = false;
      return w;
    }
    const MoeTile tile = tiles[blockIdx.y];
    w.nt = tile.rows;
    w.out_row0 = tile.first;
    w.expert = tile.expert;
    const int r = tile.first + min(g, tile.rows - 1);
    w.x_row = kGather ? sorted_slot[r] / K : r;
    w.w_row0 = tile.expert * rows_per_expert;  // < 2^31: E <= 512 experts of < 2^22 rows (checked)
    return w;
  }
  // GateUp asks for o = 0 (gate) and o = 1 (up); Gemv (down) for every row of the expert.
  __device__ float scale(const SkinnyWork& w, int o) const {
    const bool b = scale2_b != nullptr && o == 1;
    if (w.alt) return b ? alt_scale_b : alt_scale_a;
    return b ? scale2_b[w.expert] : scale2_a[w.expert];
  }
};

bool misaligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes != 0; }

// Returns the grid's tile slots; throws on shapes the kernels cannot take.
int check_skinny(const char* what, int T, int K, int kdim, int kdim_multiple, int n, const MoeRouting& r,
                 const void* act_in, const void* out) {
  auto fail = [&](const std::string& why) { throw Error(std::string(what) + ": " + why); };
  if (kdim <= 0 || kdim % kdim_multiple != 0)
    fail("reduction width " + std::to_string(kdim) + " is not a positive multiple of " + std::to_string(kdim_multiple));
  if (n <= 0 || n >= (1 << 22)) fail("output width " + std::to_string(n) + " is not in 1..2^22");
  if (r.tile_rows != kMoeSkinnyTileRows)
    fail("tile_rows " + std::to_string(r.tile_rows) + " is not " + std::to_string(kMoeSkinnyTileRows));
  if (r.experts <= 0 || r.experts > kMoeMaxExperts)
    fail(std::to_string(r.experts) + " experts (1.." + std::to_string(kMoeMaxExperts) + " supported)");
  if (K <= 0 || int64_t(T) * K > (int64_t(1) << 30)) fail("bad routing size T=" + std::to_string(T));
  const int64_t slots = moe_max_tiles(int64_t(T) * K, r.experts, kMoeSkinnyTileRows);
  if (slots > kMaxGridYZ) fail(std::to_string(T) + " tokens need more tile slots than one launch takes");
  if (misaligned(act_in, 16) || out == nullptr) fail("activations must be 16-byte aligned");
  return int(slots);
}

void check_nvfp4(const char* what, const char* name, const Nvfp4Stack& s) {
  if (!s.m.codes || !s.m.scales || !s.scale2)
    throw Error(std::string(what) + ": NVFP4 " + name + " stack has a null codes, scales or scale2 pointer");
  if (misaligned(s.m.codes, 16) || misaligned(s.m.scales, 4))
    throw Error(std::string(what) + ": NVFP4 " + name + " codes must be 16-byte and scales 4-byte aligned");
}

const bf16_t* dev(const bf16* p) { return reinterpret_cast<const bf16_t*>(p); }

// The shared expert's part: T <= 8 tokens (one work item), its widths and buffers; w0 / w1 its two
// matrices (gate, up; or down twice). Returns whether there is one (both null: none).
bool check_shared(const char* what, int T, int shared_inter, int kdim_multiple, const void* w0, const void* w1,
                  const void* in_act, const void* out) {
  if (w0 == nullptr && w1 == nullptr) return false;
  auto fail = [&](const std::string& why) { throw Error(std::string(what) + ": shared expert: " + why); };
  if (w0 == nullptr || w1 == nullptr) fail("one of its matrices is missing");
  if (T > kSkinnyTokens) fail(std::to_string(T) + " tokens (at most " + std::to_string(kSkinnyTokens) + ")");
  if (shared_inter <= 0 || shared_inter % kdim_multiple != 0 || shared_inter >= (1 << 22))
    fail("width " + std::to_string(shared_inter) + " is not a positive multiple of " + std::to_string(kdim_multiple));
  if (in_act == nullptr || out == nullptr || misaligned(in_act, 16) || misaligned(w0, 16) || misaligned(w1, 16))
    fail("null or misaligned activations, output or weights");
  return true;
}

}  // namespace

void moe_skinny_gate_up(const bf16* x, int T, int K, int hidden, const bf16* w_gate, const bf16* w_up, int inter,
                        const MoeRouting& r, bf16* act_sorted, const bf16* shared_gate, const bf16* shared_up,
                        int shared_inter, bf16* shared_act, cudaStream_t stream) {
  if (T <= 0) return;
  const char* what = "moe_skinny_gate_up";
  const int slots = check_skinny(what, T, K, hidden, 8, inter, r, x, act_sorted);
  if (misaligned(w_gate, 16) || misaligned(w_up, 16)) throw Error("moe_skinny_gate_up: weights must be 16-byte aligned");
  SkinnyMoeJob<true, const bf16_t*> job{r.tiles, r.num_tiles, r.sorted_slot, K, inter};
  job.has_alt = check_shared(what, T, shared_inter, 1, shared_gate, shared_up, x, shared_act);
  if (job.has_alt) {
    job.tokens = T;
    job.alt = {dev(x), dev(shared_gate), dev(shared_up), shared_act, hidden, shared_inter};
  }
  launch_skinny_bf16<SkinnyTile::GateUp, GemvOut::Store>(dev(x), hidden, dev(w_gate), dev(w_up), inter, act_sorted,
                                                         slots + (job.has_alt ? 1 : 0), job, stream,
                                                         std::max(inter, job.has_alt ? shared_inter : 0));
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

void moe_skinny_down(const bf16* act_sorted, int T, int K, int inter, const bf16* w_down, int hidden,
                     const MoeRouting& r, bf16* y_sorted, const bf16* shared_act, const bf16* shared_down,
                     int shared_inter, bf16* y_shared, cudaStream_t stream) {
  if (T <= 0) return;
  const char* what = "moe_skinny_down";
  const int slots = check_skinny(what, T, K, inter, 8, hidden, r, act_sorted, y_sorted);
  if (misaligned(w_down, 16)) throw Error("moe_skinny_down: weights must be 16-byte aligned");
  SkinnyMoeJob<false, const bf16_t*> job{r.tiles, r.num_tiles, r.sorted_slot, K, hidden};
  job.has_alt = check_shared(what, T, shared_inter, 8, shared_down, shared_down, shared_act, y_shared);
  if (job.has_alt) {
    job.tokens = T;
    job.alt = {dev(shared_act), dev(shared_down), dev(shared_down), y_shared, shared_inter, hidden};
  }
  launch_skinny_bf16<SkinnyTile::Gemv, GemvOut::Store>(dev(act_sorted), inter, dev(w_down), dev(w_down), hidden,
                                                       y_sorted, slots + (job.has_alt ? 1 : 0), job, stream);
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

void moe_skinny_gate_up_nvfp4(const bf16* x, int T, int K, int hidden, const Nvfp4Stack& gate, const Nvfp4Stack& up,
                              int inter, const MoeRouting& r, bf16* act_sorted, const Nvfp4Shared* shared,
                              bf16* shared_act, cudaStream_t stream) {
  if (T <= 0) return;
  const char* what = "moe_skinny_gate_up_nvfp4";
  const int slots = check_skinny(what, T, K, hidden, 64, inter, r, x, act_sorted);
  check_nvfp4(what, "gate", gate);
  check_nvfp4(what, "up", up);
  SkinnyMoeJob<true, Nvfp4Matrix> job{r.tiles, r.num_tiles, r.sorted_slot, K, inter, gate.scale2, up.scale2};
  job.has_alt =
      shared != nullptr && check_shared(what, T, shared->inter, 1, shared->gate.codes, shared->up.codes, x, shared_act);
  if (job.has_alt) {
    job.tokens = T;
    job.alt = {dev(x), shared->gate, shared->up, shared_act, hidden, shared->inter};
    job.alt_scale_a = shared->s2_gate, job.alt_scale_b = shared->s2_up;
  }
  launch_nvfp4_skinny<SkinnyTile::GateUp, GemvOut::Store>(dev(x), hidden, gate.m, up.m, inter, act_sorted,
                                                          slots + (job.has_alt ? 1 : 0), job, stream,
                                                          std::max(inter, job.has_alt ? shared->inter : 0));
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

void moe_skinny_down_nvfp4(const bf16* act_sorted, int T, int K, int inter, const Nvfp4Stack& down, int hidden,
                           const MoeRouting& r, bf16* y_sorted, const Nvfp4Shared* shared, const bf16* shared_act,
                           bf16* y_shared, cudaStream_t stream) {
  if (T <= 0) return;
  const char* what = "moe_skinny_down_nvfp4";
  const int slots = check_skinny(what, T, K, inter, 64, hidden, r, act_sorted, y_sorted);
  check_nvfp4(what, "down", down);
  SkinnyMoeJob<false, Nvfp4Matrix> job{r.tiles, r.num_tiles, r.sorted_slot, K, hidden, down.scale2, nullptr};
  job.has_alt = shared != nullptr &&
                check_shared(what, T, shared->inter, 64, shared->down.codes, shared->down.codes, shared_act, y_shared);
  if (job.has_alt) {
    job.tokens = T;
    job.alt = {dev(shared_act), shared->down, shared->down, y_shared, shared->inter, hidden};
    job.alt_scale_a = shared->s2_down;
  }
  launch_nvfp4_skinny<SkinnyTile::Gemv, GemvOut::Store>(dev(act_sorted), inter, down.m, down.m, hidden, y_sorted,
                                                        slots + (job.has_alt ? 1 : 0), job, stream);
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

}  // namespace striker::cuda
