#!/usr/bin/env bash
# Session 35 run 3: where the NVFP4 per-slot MoE stops winning — STRIKER_AB_PERSLOT_MAX=64 (per slot) against 8
# (grouped) at 16-64 sequences, 1K context; and the backend tests with the MoE per slot up to 64 tokens.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
C=$B/config.json
step() {  # step FORMAT CONTEXT BATCH STEPS -> device ms/kernels
  local q=""; [ $1 = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $B/striker bench latency --config $C $q --graphs --context $2 --batch $3 --steps $4 --warmup 3 2>&1)
  echo "$(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2; do
  for b in 16 20 24 32 48 64; do
    echo "nvfp4 ctx1024 b$b: grouped $(STRIKER_AB_PERSLOT_MAX=8 step nvfp4 1024 $b 20) | per-slot $(STRIKER_AB_PERSLOT_MAX=64 step nvfp4 1024 $b 20)"
  done
done
echo "nvfp4 ctx8192 b16: grouped $(STRIKER_AB_PERSLOT_MAX=8 step nvfp4 8192 16 20) | per-slot $(STRIKER_AB_PERSLOT_MAX=64 step nvfp4 8192 16 20)"
echo "ab done at ${SECONDS}s"
STRIKER_AB_PERSLOT_MAX=64 timeout 200 $B/test_cuda_kernels --gtest_filter='CudaBackend.*' > $OUT/perslot64_tests.txt 2>&1
echo "per-slot 64 tests rc=$? at ${SECONDS}s $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/perslot64_tests.txt | tr '\n' ' ')"
grep -E '^\[  FAILED' $OUT/perslot64_tests.txt | head
echo "all done at ${SECONDS}s"
