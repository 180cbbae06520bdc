#!/usr/bin/env bash
# Session 35 run 4: main with NVFP4 experts per slot up to 24 tokens (kMoePerSlotMaxTokensNvfp4), verified — the
# backend and MoE kernel tests — and the batched and issue-11 steps.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 $B/test_cuda_kernels --gtest_filter='CudaBackend.*:CudaMoe*:CudaNvfp4.Selected*:CudaAttention.OneToken*' > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests.txt | tr '\n' ' ')"
grep -E '^\[  FAILED' $OUT/tests.txt | head
C=$B/config.json
step() {  # step FORMAT CONTEXT BATCH STEPS
  local q=""; [ $1 = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $B/striker bench latency --config $C $q --graphs --context $2 --batch $3 --steps $4 --warmup 3 2>&1)
  echo "$1 ctx$2 b$3: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') $(echo "$r" | grep -oE 'kernels per step: [0-9]+') $(echo "$r" | grep -oE '[0-9.]+% of the 4.6' | head -1)$(echo "$r" | grep -m1 -i error)"
}
for b in 9 16 24 25 32 64; do step nvfp4 1024 $b 20; done
for b in 9 16; do step bf16 1024 $b 20; done
for f in bf16 nvfp4; do step $f 8192 1 50; step $f 100000 1 50; step $f 8192 8 50; done
echo "all done at ${SECONDS}s"
