#!/usr/bin/env bash
# Session 32 run 9 (kernel payload of branch s32-pair): the 16-row NVFP4 fragment kernels (gate/up deep and
# wide, resident-A down) with the pair decode (STRIKER_AB_PAIR=1: nvfp4_pair_bf16, k order nvfp4_pair_frag_k)
# against main's table decode, one binary. ncu (run 8) found the wide gate/up issue-limited: ~460 instructions
# per k tile and warp (7.2 per weight), 117 of them IMAD (sign multiplies, the tables' registers re-made).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
STRIKER_AB_PAIR=1 timeout 70 $B/test_cuda_kernels --gtest_filter='CudaMoeGroupedNvfp4.*:CudaBackend.Nvfp4Batched*' > $OUT/tests.txt 2>&1
echo "tests with the pair decode rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests.txt | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' $OUT/tests.txt | head -5
for v in 0 1; do
  STRIKER_AB_PAIR=$v timeout 60 $B/bench_cuda_kernels batched-moe 9 16 32 64 > $OUT/bm_$v.txt 2>&1
  echo "pair=$v $(grep -E 'nvfp4 moe grouped T=[0-9]+ (gate|down|all)' $OUT/bm_$v.txt | awk -F'|' '{print $2 $3 $4}' | sed 's/nvfp4 moe grouped //; s/+SwiGLU//; s/all 4 kernels/all/' | tr -s ' ' | paste -sd' ')"
done
echo "kernels done at ${SECONDS}s"
C=$B/config.json
for rep in 1 2; do
  for b in 16 32 64; do
    line="b$b:"
    for v in 0 1; do
      r=$(STRIKER_AB_PAIR=$v timeout 40 $B/striker bench latency --config $C --quantization nvfp4 --graphs --context 1024 --batch $b --steps 20 --warmup 3 2>&1)
      line="$line pair=$v $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')$(echo "$r" | grep -m1 -i error)"
    done
    echo "$line"
  done
done
echo "all done at ${SECONDS}s"
