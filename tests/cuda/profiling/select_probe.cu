// EXPERIMENT (session 17, a measuring probe, not a test; prepared for session 18 with the kBallot rounds): cycles of one warp's top-K selection
// (router_select_warp_redux, router_math.cuh) and of its parts, one warp alone on an SM.
//   nvcc -std=c++20 -O3 -arch=sm_90a -I src tests/cuda/profiling/select_probe.cu -o select_probe
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/moe/router_math.cuh"

using namespace striker::cuda;

constexpr int E = 256, K = 6, P = 8, kSets = 4, kIters = 256;


// mode 0: the whole selection (main's); 1: the keys with the IEEE division; 2: the keys with router_sigmoids
// (main's); 3: the K rounds only (keys precomputed); 4: the whole selection with the ballot rounds (kBallot).
template <int kMode>
__global__ void probe(const float* __restrict__ logits_g, const float* __restrict__ bias_g, long long* cycles,
                      int* out_ids, float* out_w, unsigned* sink) {
  __shared__ float lg[kSets][E], bs[E];
  __shared__ int32_t ids[K];
  __shared__ float w[K];
  const int lane = threadIdx.x;
  for (int i = lane; i < kSets * E; i += 32) lg[i / E][i % E] = logits_g[i];
  for (int i = lane; i < E; i += 32) bs[i] = bias_g[i];
  __syncwarp();
  unsigned acc = 0;
  unsigned key0[P];
#pragma unroll
  for (int i = 0; i < P; ++i) key0[i] = router_select_key(1.0f / (1.0f + expf(-lg[0][lane + 32 * i])) + bs[lane + 32 * i]);
  const long long t0 = clock64();
  for (int it = 0; it < kIters; ++it) {
    const float* l = lg[(it + (acc & 1)) % kSets];
    if constexpr (kMode == 0 || kMode == 4) {
      router_select_warp_redux<P, kMode == 4>([&](int e) { return l[e]; }, 0, E, K, bs, true, 2.5f, ids, w);
      __syncwarp();
      acc += unsigned(ids[lane % K]);
    } else if constexpr (kMode == 1 || kMode == 2) {
      float x[P], sg[P];
#pragma unroll
      for (int i = 0; i < P; ++i) x[i] = l[lane + 32 * i];
      if constexpr (kMode == 2) router_sigmoids<P>(x, sg);
#pragma unroll
      for (int i = 0; i < P; ++i) {
        const float s = kMode == 1 ? 1.0f / (1.0f + expf(-x[i])) : sg[i];
        acc ^= router_select_key(s + bs[lane + 32 * i]);
      }
      acc = __reduce_xor_sync(0xffffffffu, acc);
    } else {
      unsigned key[P];
#pragma unroll
      for (int i = 0; i < P; ++i) key[i] = key0[i] ^ (acc & 1u);
      unsigned b1 = 0, b2 = 0, picked = 0;
      int e1 = 0, e2 = 0;
      auto best_two = [&]() {
        b1 = b2 = 0;
#pragma unroll
        for (int i = 0; i < P; ++i) {
          const unsigned k = (picked >> i) & 1u ? 0u : key[i];
          if (k > b1) b2 = b1, e2 = e1, b1 = k, e1 = lane + 32 * i;
          else if (k > b2) b2 = k, e2 = lane + 32 * i;
        }
      };
      best_two();
      bool second_known = true;
      int mine = 0;
      for (int k = 0; k < K; ++k) {
        const unsigned m = __reduce_max_sync(0xffffffffu, b1);
        int e = E - 1;
        if (m != 0u) {
          e = int(__reduce_min_sync(0xffffffffu, b1 == m ? unsigned(e1) : 0xffffffffu));
          if (lane == (e & 31)) {
            picked |= 1u << (e >> 5);
            if (second_known) b1 = b2, e1 = e2, second_known = false;
            else best_two(), second_known = true;
          }
        }
        if (lane == k) mine = e;
      }
      acc += __reduce_add_sync(0xffffffffu, unsigned(mine));
    }
  }
  const long long t1 = clock64();
  if (lane == 0) {
    cycles[kMode] = (t1 - t0) / kIters;
    sink[kMode] = acc;
  }
  if ((kMode == 0 || kMode == 4) && lane < K) out_ids[kMode * 2 + lane] = ids[lane], out_w[kMode * 2 + lane] = w[lane];
  if constexpr (kMode == 0 || kMode == 4) sink[kMode] = acc;
}

int main() {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> logits(kSets * E), bias(E);
  for (auto& v : logits) v = nd(rng);
  for (int e = 0; e < E; ++e) logits[3 * E + e] = float(int(rng() % 3) - 1);  // set 3: many exact ties
  for (int e = 0; e < E; ++e) bias[e] = e % 4 == 0 ? 0.1f : 0.f;  // few distinct biases: set 3's ties survive
  float *dl, *db, *dw;
  long long* dc;
  int* di;
  unsigned* ds;
  cudaMalloc(&dl, logits.size() * 4);
  cudaMalloc(&db, bias.size() * 4);
  cudaMalloc(&dc, 8 * 8);
  cudaMalloc(&di, 256);
  cudaMalloc(&dw, 256);
  cudaMalloc(&ds, 64);
  cudaMemcpy(dl, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice);
  for (int rep = 0; rep < 3; ++rep) {
    probe<0><<<1, 32>>>(dl, db, dc, di, dw, ds);
    probe<1><<<1, 32>>>(dl, db, dc, di, dw, ds);
    probe<2><<<1, 32>>>(dl, db, dc, di, dw, ds);
    probe<3><<<1, 32>>>(dl, db, dc, di, dw, ds);
    probe<4><<<1, 32>>>(dl, db, dc, di, dw, ds);
  }
  long long c[5];
  unsigned sk[5];
  int hid[16];
  float hw[16];
  cudaMemcpy(hid, di, sizeof(hid), cudaMemcpyDeviceToHost);
  cudaMemcpy(hw, dw, sizeof(hw), cudaMemcpyDeviceToHost);
  cudaMemcpy(c, dc, sizeof(c), cudaMemcpyDeviceToHost);
  cudaMemcpy(sk, ds, sizeof(sk), cudaMemcpyDeviceToHost);
  std::printf("keys checksum IEEE division %08x, branch-free rcp %08x (%s)\n", sk[1], sk[2],
              sk[1] == sk[2] ? "same bits" : "DIFFERENT");
  const cudaError_t err = cudaDeviceSynchronize();
  bool same = sk[0] == sk[4];
  for (int i = 0; i < K; ++i) same = same && hid[i] == hid[8 + i] && std::memcmp(&hw[i], &hw[8 + i], 4) == 0;
  std::printf("select probe (one warp alone, cycles per call at ~1.98 GHz): whole %lld, whole with the ballot rounds "
              "%lld, keys %lld, keys with the fast sigmoids %lld, K rounds %lld  (%s); whole selections %s\n",
              c[0], c[4], c[1], c[2], c[3], cudaGetErrorString(err), same ? "same ids and weight bits" : "DIFFER");
  return err == cudaSuccess ? 0 : 1;
}
