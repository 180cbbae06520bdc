// CPU references of the device-side grouped MoE (moe_grouped.h).
#include <cmath>

#include "backends/cuda/moe/moe_grouped.h"

namespace striker::cuda {
namespace {

double dot(const bf16* a, const bf16* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(bf16_to_float(a[i])) * bf16_to_float(b[i]);
  return s;
}

}  // namespace

void moe_route_sort_ref(const std::vector<int32_t>& topk_ids, int T, int K, int experts, int tile_rows,
                        std::vector<int32_t>& sorted_slot, std::vector<int32_t>& slot_row,
                        std::vector<MoeTile>& tiles, int shared_rows) {
  const int slots = T * K;
  // Bucket `experts` collects out-of-range ids after every real expert (no tiles).
  auto bucket = [&](int s) {
    const int32_t e = topk_ids[size_t(s)];
    return e >= 0 && e < experts ? e : experts;
  };
  std::vector<int32_t> offset(size_t(experts) + 2, 0);
  for (int s = 0; s < slots; ++s) ++offset[size_t(bucket(s)) + 1];
  for (int e = 0; e <= experts; ++e) offset[size_t(e) + 1] += offset[size_t(e)];
  std::vector<int32_t> cursor(offset.begin(), offset.end() - 1);
  sorted_slot.assign(size_t(slots), -1);
  slot_row.assign(size_t(slots), -1);
  for (int s = 0; s < slots; ++s) {  // ascending slots: an expert's rows keep slot order
    const int32_t r = cursor[size_t(bucket(s))]++;
    sorted_slot[size_t(r)] = s;
    slot_row[size_t(s)] = r;
  }
  tiles.clear();
  for (int e = 0; e < experts; ++e)
    for (int32_t first = offset[size_t(e)]; first < offset[size_t(e) + 1]; first += tile_rows)
      tiles.push_back(MoeTile{e, first, std::min(tile_rows, offset[size_t(e) + 1] - first), 0});
  // The shared expert (expert id `experts`): rows slots + t gather token t, in tiles after the routed ones.
  for (int t = 0; t < shared_rows; ++t) sorted_slot.push_back(t * K);
  for (int first = 0; first < shared_rows; first += tile_rows)
    tiles.push_back(MoeTile{experts, slots + first, std::min(tile_rows, shared_rows - first), 0});
}

namespace {

// Per-expert factor of a reference product: 1 for BF16 stacks (null), scale2[e] for NVFP4.
double factor(const std::vector<float>* scale2, int e) { return scale2 ? double((*scale2)[size_t(e)]) : 1.0; }

void gate_up_scaled(const std::vector<bf16>& x, int K, int hidden, const std::vector<bf16>& w_gate,
                    const std::vector<float>* s2_gate, const std::vector<bf16>& w_up, const std::vector<float>* s2_up,
                    int inter, const std::vector<int32_t>& sorted_slot, const std::vector<MoeTile>& tiles,
                    std::vector<bf16>& act_sorted) {
  act_sorted.resize(sorted_slot.size() * size_t(inter));
  for (const MoeTile& tile : tiles) {
    const bf16* g = w_gate.data() + size_t(tile.expert) * inter * hidden;
    const bf16* u = w_up.data() + size_t(tile.expert) * inter * hidden;
    const double fg = factor(s2_gate, tile.expert), fu = factor(s2_up, tile.expert);
    for (int r = tile.first; r < tile.first + tile.rows; ++r) {
      const bf16* xt = x.data() + size_t(sorted_slot[size_t(r)] / K) * hidden;
      for (int i = 0; i < inter; ++i) {
        const float gv = round_bf16(float(fg * dot(xt, g + size_t(i) * hidden, hidden)));
        const float uv = round_bf16(float(fu * dot(xt, u + size_t(i) * hidden, hidden)));
        act_sorted[size_t(r) * inter + i] = float_to_bf16(round_bf16(gv / (1.0f + std::exp(-gv))) * uv);
      }
    }
  }
}

void down_scaled(const std::vector<bf16>& act_sorted, int inter, const std::vector<bf16>& w_down,
                 const std::vector<float>* s2_down, int hidden, const std::vector<MoeTile>& tiles,
                 std::vector<bf16>& y_sorted) {
  y_sorted.resize(act_sorted.size() / size_t(inter) * size_t(hidden));
  for (const MoeTile& tile : tiles) {
    const bf16* d = w_down.data() + size_t(tile.expert) * hidden * inter;
    const double f = factor(s2_down, tile.expert);
    for (int r = tile.first; r < tile.first + tile.rows; ++r)
      for (int o = 0; o < hidden; ++o)
        y_sorted[size_t(r) * hidden + o] =
            float_to_bf16(float(f * dot(act_sorted.data() + size_t(r) * inter, d + size_t(o) * inter, inter)));
  }
}

// A whole NVFP4 stack of `rows` rows as bf16 (E2M1·E4M3 is exact in bf16; no scale2).
std::vector<bf16> dequantized_bf16(const Nvfp4HostMatrix& m, int64_t rows, int in) {
  const auto f = nvfp4_dequantize_ref(m, rows, in);
  std::vector<bf16> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) out[i] = float_to_bf16(f[i]);
  return out;
}

}  // namespace

void moe_grouped_gate_up_ref(const std::vector<bf16>& x, int K, int hidden, const std::vector<bf16>& w_gate,
                             const std::vector<bf16>& w_up, int inter, const std::vector<int32_t>& sorted_slot,
                             const std::vector<MoeTile>& tiles, std::vector<bf16>& act_sorted) {
  gate_up_scaled(x, K, hidden, w_gate, nullptr, w_up, nullptr, inter, sorted_slot, tiles, act_sorted);
}

void moe_grouped_down_ref(const std::vector<bf16>& act_sorted, int inter, const std::vector<bf16>& w_down, int hidden,
                          const std::vector<MoeTile>& tiles, std::vector<bf16>& y_sorted) {
  down_scaled(act_sorted, inter, w_down, nullptr, hidden, tiles, y_sorted);
}

void moe_grouped_gate_up_nvfp4_ref(const std::vector<bf16>& x, int K, int hidden, const Nvfp4HostMatrix& w_gate,
                                   const std::vector<float>& scale2_gate, const Nvfp4HostMatrix& w_up,
                                   const std::vector<float>& scale2_up, int inter,
                                   const std::vector<int32_t>& sorted_slot, const std::vector<MoeTile>& tiles,
                                   std::vector<bf16>& act_sorted) {
  const int64_t rows = int64_t(scale2_gate.size()) * inter;
  gate_up_scaled(x, K, hidden, dequantized_bf16(w_gate, rows, hidden), &scale2_gate,
                 dequantized_bf16(w_up, rows, hidden), &scale2_up, inter, sorted_slot, tiles, act_sorted);
}

void moe_grouped_down_nvfp4_ref(const std::vector<bf16>& act_sorted, int inter, const Nvfp4HostMatrix& w_down,
                                const std::vector<float>& scale2_down, int hidden, const std::vector<MoeTile>& tiles,
                                std::vector<bf16>& y_sorted) {
  const int64_t rows = int64_t(scale2_down.size()) * hidden;
  down_scaled(act_sorted, inter, dequantized_bf16(w_down, rows, inter), &scale2_down, hidden, tiles, y_sorted);
}

void moe_combine_sorted_ref(const std::vector<bf16>& y_sorted, const std::vector<int32_t>& slot_row,
                            const std::vector<float>& topk_w, const std::vector<bf16>& y_shared, int T, int K,
                            int hidden, std::vector<bf16>& h) {
  for (int t = 0; t < T; ++t)
    for (int o = 0; o < hidden; ++o) {
      double sum = 0;
      for (int k = 0; k < K; ++k)
        sum += double(topk_w[size_t(t) * K + k]) *
               bf16_to_float(y_sorted[size_t(slot_row[size_t(t) * K + k]) * hidden + o]);
      float y = round_bf16(float(sum));
      if (!y_shared.empty()) y = round_bf16(y + bf16_to_float(y_shared[size_t(t) * hidden + o]));
      bf16& hv = h[size_t(t) * hidden + o];
      hv = float_to_bf16(bf16_to_float(hv) + y);
    }
}

}  // namespace striker::cuda
