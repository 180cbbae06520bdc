#!/usr/bin/env bash
# Session 32 run 4 (kernel payload of branch s32-occ): the 16-row NVFP4 gate/up with the measured rule
# (nvfp4_gate_up_many_ctas: F2 at 5 CTAs per SM above 60 pairs) — its tests — and the 16-row NVFP4 down's
# occupancy (below 384 pairs: grouped_gemm_kernel<16, 1, Nvfp4TileWeights>, 111 registers, 4 CTAs per SM;
# ~80 tiles x 32 column blocks at T = 16 = 2,560 CTAs). STRIKER_AB_DN_OCC: 0 main, 1 (F4, 5/SM: 79 regs),
# 2 (F3, 5/SM: 79), 3 (F2, 5/SM: 71), 5 (F3, 6/SM: 79).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 80 $B/test_cuda_kernels --gtest_filter='CudaMoeGroupedNvfp4.*:CudaBackend.Nvfp4Batched*' > $OUT/tests.txt 2>&1
echo "tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests.txt | tr '\n' ' ')"
for v in 0 1 2 3 5; do
  STRIKER_AB_DN_OCC=$v timeout 60 $B/bench_cuda_kernels batched-moe 9 16 32 > $OUT/bm_$v.txt 2>&1
  echo "v$v $(grep -E 'nvfp4 moe grouped T=[0-9]+ (gate|down)' $OUT/bm_$v.txt | awk -F'|' '{print $2 $4}' | sed 's/nvfp4 moe grouped //; s/+SwiGLU//' | tr -s ' ' | paste -sd' ')"
done
echo "kernels done at ${SECONDS}s"
C=$B/config.json
for rep in 1 2; do
  for b in 9 16 32; do
    line="b$b:"
    for v in 0 1 3 5; do
      r=$(STRIKER_AB_DN_OCC=$v timeout 60 $B/striker bench latency --config $C --quantization nvfp4 --graphs --context 1024 --batch $b --steps 30 --warmup 3 2>&1)
      line="$line v$v $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')$(echo "$r" | grep -m1 -i error)"
    done
    echo "$line"
  done
done
echo "all done at ${SECONDS}s"
