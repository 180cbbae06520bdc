#!/usr/bin/env bash
# Prepared in session 34 (no device time left), to run first in session 35: the shared expert as expert E of the
# grouped decode kernels (9-64 tokens), patch .gpu_run/s34_shared_tiles.patch.
# Build: git checkout -b s35ab && git apply .gpu_run/s34_shared_tiles.patch && commit; ninja striker test_cuda_kernels;
# STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_STRIP=all STRIKER_SHIP_TRACE=1 bash scripts/ship_gpu.sh;
# carry .gpuwork, unpack into /tmp/c, run from there. ~6 min.
# STRIKER_AB_SHARED_TILES=1: the shared expert's rows sorted in after the routed ones (moe_route_sort's shared_rows)
# and its tiles run in the grouped gate/up and down launches, where main runs it as two skinny launches (NVFP4) or
# cuBLASLt GEMMs + a SwiGLU kernel (BF16) of its own. Prediction (docs/performance.md, thirty-fourth session):
# NVFP4 16 seqs -0.25..-0.35 ms, 9 and 64 similar; BF16 16 seqs -0.4..-0.7 ms.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
STRIKER_AB_SHARED_TILES=1 timeout 240 $B/test_cuda_kernels \
  --gtest_filter='CudaMoeGrouped*:CudaBackend.*:CudaMoe.*' > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests.txt | tr '\n' ' ')"
grep -E '^\[  FAILED' $OUT/tests.txt | head
C=$B/config.json
step() {  # step FORMAT CONTEXT BATCH -> device ms/kernels
  local q=""; [ $1 = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 40 $B/striker bench latency --config $C $q --graphs --context $2 --batch $3 --steps 20 --warmup 3 2>&1)
  echo "$(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2; do
  for cb in "nvfp4 9" "nvfp4 16" "nvfp4 32" "nvfp4 64" "bf16 9" "bf16 16" "bf16 64" "nvfp4 8"; do
    set -- $cb
    echo "shared tiles $1 ctx1024 b$2: off $(step $1 1024 $2) on $(STRIKER_AB_SHARED_TILES=1 step $1 1024 $2)"
  done
done
# Timelines of the 16-sequence NVFP4 step, switch off and on (per-kernel shares: where the shared launches went).
for ab in 0 1; do
  STRIKER_AB_SHARED_TILES=$ab OUT=/tmp/tl$ab STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:1024:16" \
    timeout 120 bash scripts/gpu_profile.sh $B > $OUT/timeline_shared_tiles_$ab.txt 2>&1
  echo "timeline shared tiles=$ab rc=$?"; tail -25 $OUT/timeline_shared_tiles_$ab.txt
done
echo "all done at ${SECONDS}s"
