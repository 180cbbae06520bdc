#!/usr/bin/env bash
# Session 32 run 3 (kernel payload of branch s32-occ): the 16-row NVFP4 gate/up fragment kernel's occupancy.
# Main's kernel takes 160 registers (3 CTAs of 128 threads per SM: 396 slots), so at 16 sequences (~80 tiles x
# 8 column blocks = ~640 CTAs) it runs two rounds, at 64 (~1,590) five. STRIKER_AB_GU_OCC picks the fetch-ahead
# depth F and __launch_bounds__' CTAs per SM: 0 main (F4, 160 regs), 6 (F4, 4/SM, 128 regs), 5 (F3, 4/SM, 126),
# 1 (F4, 5/SM, 96 + spills), 2 (F3, 5/SM, 96 + 8 B spills), 3 (F2, 5/SM, 96), 4 (F2, 6/SM, 80 + spills).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
for v in 0 6 5 3 2 4 1; do
  STRIKER_AB_GU_OCC=$v timeout 60 $B/test_cuda_kernels --gtest_filter='CudaMoeGroupedNvfp4.*:CudaBackend.Nvfp4Batched*' > $OUT/tests_$v.txt 2>&1
  echo "v$v tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests_$v.txt | tr '\n' ' ')"
done
echo "tests done at ${SECONDS}s"
for v in 0 6 5 3 2 4 1; do
  STRIKER_AB_GU_OCC=$v timeout 90 $B/bench_cuda_kernels batched-moe 9 16 32 64 > $OUT/bm_$v.txt 2>&1
  echo "v$v: $(grep -E 'nvfp4 moe grouped T=[0-9]+ gate/up' $OUT/bm_$v.txt | awk '{for(i=1;i<=NF;i++) if($i ~ /^T=/) t=$i; print t, $0}' | grep -oE 'T=[0-9]+|[0-9]+\.[0-9]+ us' | paste -sd' ')"
done
echo "kernels done at ${SECONDS}s"
grep -E 'nvfp4 moe grouped' $OUT/bm_0.txt | head -12
C=$B/config.json
for rep in 1 2; do
  for b in 16 32 64; do
    line="b$b:"
    for v in 0 6 5 3 4; do
      r=$(STRIKER_AB_GU_OCC=$v timeout 60 $B/striker bench latency --config $C --quantization nvfp4 --graphs --context 1024 --batch $b --steps 30 --warmup 3 2>&1)
      line="$line v$v $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')$(echo "$r" | grep -m1 -i error)"
    done
    echo "$line"
  done
done
echo "all done at ${SECONDS}s"
