#!/usr/bin/env bash
# Prepared in session 33 (no device time left), to run first in session 34: the two prepared A/Bs in one binary.
# Build: git checkout -b s34ab && git apply .gpu_run/s33_front.patch .gpu_run/s33_bf16_skinny.patch
# .gpu_run/s33_nv_wide_two.patch && commit;
# ninja striker test_cuda_kernels; STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_STRIP=all
# STRIKER_SHIP_TRACE=0 bash scripts/ship_gpu.sh; carry .gpuwork, unpack into /tmp/c, run from there. ~5 min.
#  1. The attention front inside the split kernel for decode steps of one token per sequence (2-64 sequences;
#     docs/performance.md, thirty-third session, prediction: batch 2-8 -0.05..-0.08 ms, 16 seqs -0.05..-0.1, 64 ~0,
#     batch 8 446 -> 397 kernels). STRIKER_AB_FRONT_OFF=1: the front kernel first, as on main.
#  2. BF16 dense projections (QKV, o_proj, shared expert, dense MLP; not the LM head) of 9-64 tokens on the skinny
#     kernels instead of cuBLASLt (STRIKER_AB_BF16_SKINNY = the largest T on them; 8 = main). The NVFP4 twin won
#     -2.7 ms at 16 sequences in session 32. Prediction: BF16 16 seqs (12.6 ms at 1K on the H100) -0.5 to -1.0 ms,
#     9 seqs similar, 64 seqs smaller (each 8-token group reads the matrix again, from L2 where it fits).
#  3. NVFP4 skinny launches with a wide grid (the LM head's 4,736 CTAs) take two token groups per CTA from 9 tokens,
#     not 24 (STRIKER_AB_NV_WIDE_TWO = the grid.x from which; 0 = main): the LM head's 175 MB read once per 16 tokens
#     instead of per 8. Prediction: 9-23 sequences -0.05..-0.09 ms per step, nothing else moves.
# Tests run with the candidates on; the benches change one switch at a time.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
STRIKER_AB_BF16_SKINNY=64 STRIKER_AB_NV_WIDE_TWO=1024 timeout 200 $B/test_cuda_kernels \
  --gtest_filter='CudaAttention.*:CudaQkRopeKv.*:CudaBackend.*:CudaGemv.*:CudaNvfp4.*' > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests.txt | tr '\n' ' ')"
grep -E '^\[  FAILED' $OUT/tests.txt | head
C=$B/config.json
step() {  # step FORMAT CONTEXT BATCH -> device ms/kernels
  local q=""; [ $1 = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 40 $B/striker bench latency --config $C $q --graphs --context $2 --batch $3 --steps 30 --warmup 3 2>&1)
  echo "$(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2; do
  for cb in "bf16 8192 8" "nvfp4 8192 8" "nvfp4 8192 4" "nvfp4 8192 2" "nvfp4 1024 16" "nvfp4 1024 64" "nvfp4 8192 1"; do
    set -- $cb
    echo "front $1 ctx$2 b$3: off $(STRIKER_AB_FRONT_OFF=1 step $1 $2 $3) on $(step $1 $2 $3)"
  done
  for b in 9 16 32 64; do
    line="bf16 skinny ctx1024 b$b:"
    for v in 8 16 32 64; do line="$line t$v $(STRIKER_AB_BF16_SKINNY=$v step bf16 1024 $b)"; done
    echo "$line"
  done
  for b in 9 12 16; do
    echo "nvfp4 wide two ctx1024 b$b: off $(step nvfp4 1024 $b) on $(STRIKER_AB_NV_WIDE_TWO=1024 step nvfp4 1024 $b)"
  done
done
echo "all done at ${SECONDS}s"
