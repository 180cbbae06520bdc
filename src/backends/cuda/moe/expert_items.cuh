// The routed work of a decode step of 2-8 tokens grouped by expert, for the selected-experts MoE
// kernels (moe.cu, nvfp4_moe.cu, nvfp4_moe_mma.cu). Per slot (token t, pick k: slot t·K + k) those
// kernels streamed the slot's expert rows, so an expert chosen by n tokens was read n times and the
// shared expert T times; at 8 tokens that was ~20 % of the MoE bytes of a Flint step (48 picks of
// 256 experts: ~44 distinct, and the shared expert 8 times). Grouped, item j of a step is the j-th
// distinct expert of ids[0 .. slots) in the order of first appearance, with the slots that chose it
// (one per token at most: a token's K experts are distinct), and a kernel loads each item's rows once
// and runs the one-token computation for each of its slots: the same bits as slot by slot.
// expert_item is computed by every warp from the ids alone (two loads per lane, match and ballot
// votes; no shared memory, no barrier); its CPU reference is expert_items_ref (expert_items.h).
#pragma once
#include <cstdint>

namespace striker::cuda {

constexpr int kMaxItemSlots = 64;  // slots of one step: 2 words of a lane mask

// The slots of an item as a 64-bit mask in two words (bit s of lo: slot s, bit s of hi: slot 32 + s).
struct ExpertItem {
  int expert;  // -1: the step has fewer distinct experts than the item index
  uint32_t lo, hi;
};

// Item j (warp-uniform) of the step's slots (<= kMaxItemSlots) routed by ids (>= 0). Every lane of
// the warp must call it and gets the same item.
__device__ __forceinline__ ExpertItem expert_item(const int32_t* __restrict__ ids, int slots, int j) {
  const int lane = threadIdx.x & 31;
  // A missing slot gets a negative id of its own, so it never matches an expert or another slot.
  const int a = lane < slots ? ids[lane] : -1 - lane;
  const int b = 32 + lane < slots ? ids[32 + lane] : -33 - lane;
  const uint32_t below = (1u << lane) - 1u;
  // Every lane votes (a vote inside a short-circuit would leave lanes out of the full-mask collective).
  const uint32_t same_a = __match_any_sync(~0u, a), same_b = __match_any_sync(~0u, b);
  const bool first_a = lane < slots && (same_a & below) == 0u;
  bool first_b = 32 + lane < slots && (same_b & below) == 0u;
  if (slots > 32)  // slot 32 + lane's expert may have appeared in slots 0-31
    for (int i = 0; i < 32; ++i) first_b &= __shfl_sync(~0u, a, i) != b;
  const uint32_t fa = __ballot_sync(~0u, first_a), fb = __ballot_sync(~0u, first_b);
  const int na = __popc(fa);
  int e = -1;
  if (j < na) {
    const uint32_t pick = __ballot_sync(~0u, first_a && __popc(fa & below) == j);
    e = __shfl_sync(~0u, a, __ffs(pick) - 1);
  } else if (j - na < __popc(fb)) {
    const uint32_t pick = __ballot_sync(~0u, first_b && __popc(fb & below) == j - na);
    e = __shfl_sync(~0u, b, __ffs(pick) - 1);
  }
  if (e < 0) return ExpertItem{-1, 0u, 0u};
  return ExpertItem{e, __ballot_sync(~0u, a == e), __ballot_sync(~0u, b == e)};
}

// The item of slots 0 .. n-1 (n <= kMaxItemSlots): the shared expert, whose "slots" are the step's tokens.
__device__ __forceinline__ ExpertItem all_slots_item(int n) {
  const uint32_t lo = n >= 32 ? ~0u : (1u << n) - 1u;
  const uint32_t hi = n >= 64 ? ~0u : n > 32 ? (1u << (n - 32)) - 1u : 0u;
  return ExpertItem{-1, lo, hi};
}

// Takes the lowest slot of a non-empty item's remaining mask (ascending slots: ascending tokens).
__device__ __forceinline__ int pop_slot(uint32_t& lo, uint32_t& hi) {
  if (lo != 0u) {
    const int s = __ffs(lo) - 1;
    lo &= lo - 1u;
    return s;
  }
  const int s = 32 + __ffs(hi) - 1;
  hi &= hi - 1u;
  return s;
}

// Makes a slot loop's weight registers opaque at the top of each pass, so the compiler cannot hoist
// their decode (bf16 -> fp32, E2M1·E4M3 -> bf16 pairs) out of the loop: hoisted for every slot of an
// item, the decoded rows took 128-253 registers (2x) and spilled. Each slot then decodes them again, as a
// one-token step does.
__device__ __forceinline__ void keep_opaque(uint4& q) {
  asm volatile("" : "+r"(q.x), "+r"(q.y), "+r"(q.z), "+r"(q.w));
}
__device__ __forceinline__ void keep_opaque(uint32_t& v) { asm volatile("" : "+r"(v)); }

}  // namespace striker::cuda
