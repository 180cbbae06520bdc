#!/usr/bin/env bash
# Prepared in session 32 (no device time left), branch s32-skinny16 (= main + .gpu_run/s32_skinny16.patch): the NVFP4
# skinny kernels of 9-64 tokens with two MMA column groups (16 tokens) per CTA, every decoded weight fragment fed to
# both (nvfp4_skinny2_kernel, STRIKER_AB_SKINNY16=1; main's kernel decodes the codes once per 8 tokens). Each column
# is the same arithmetic either way, so the outputs must be bit-identical to main's.
# Prediction (docs/performance.md, thirty-second session): the skinny family 1.64 ms per 16-sequence step (H100) ->
# ~1.0-1.2 (-0.4..-0.6 ms per step), 64 sequences -0.8..-1.5 ms (the LM head's 175 MB read 4 times instead of 8);
# risk at 9-16 sequences: half the CTAs (QKV 160 instead of 320). The winner becomes the rule; the knob goes.
# Payload: build the branch (striker, test_cuda_kernels), STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0
# STRIKER_SHIP_STRIP=all STRIKER_SHIP_TRACE=0 bash scripts/ship_gpu.sh; carry .gpuwork, unpack into /tmp/c. ~3 min.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
STRIKER_AB_SKINNY16=1 timeout 90 $B/test_cuda_kernels --gtest_filter='CudaNvfp4.*:CudaBackend.Nvfp4*' > $OUT/tests.txt 2>&1
echo "tests with two groups rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests.txt | tr '\n' ' ')"
grep -E '^\[  FAILED' $OUT/tests.txt | head
C=$B/config.json
for rep in 1 2; do
  for b in 9 12 16 24 32 64; do
    line="b$b:"
    for v in 0 1; do
      r=$(STRIKER_AB_SKINNY16=$v timeout 40 $B/striker bench latency --config $C --quantization nvfp4 --graphs --context 1024 --batch $b --steps 20 --warmup 3 2>&1)
      line="$line g$v $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')$(echo "$r" | grep -m1 -i error)"
    done
    echo "$line"
  done
done
echo "all done at ${SECONDS}s"
