#!/usr/bin/env bash
# Prepared in session 35 (no device time left), to run first in session 36, two independent A/Bs in one binary:
# (a) the shared expert of 2-24 NVFP4 tokens as skinny tiles, one grid row per 8 tokens, in the per-slot MoE
#     kernels, and STRIKER_AB_PERSLOT_NVFP4_MAX (overrides kMoePerSlotMaxTokensNvfp4 = 24, up to 48) for the
#     crossover — patch .gpu_run/s35_shared_skinny.patch (branch s35-shared-skinny-v2);
# (b) the one-launch router at 9-24 tokens on x already normalised by the o_proj residual — patch
#     .gpu_run/s35_router_plain.patch (branch s35-router-plain), switch STRIKER_AB_ROUTER_SPREAD=N (one launch up
#     to N tokens; unset = 8 = main).
# Build: git checkout -b s36ab && git apply .gpu_run/s35_shared_skinny.patch .gpu_run/s35_router_plain.patch &&
# commit; ninja striker test_cuda_kernels;
# STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_STRIP=all STRIKER_SHIP_TRACE=1 bash scripts/ship_gpu.sh;
# carry .gpuwork, unpack into /tmp/c, run from there. ~5 min.
# STRIKER_AB_SHARED_SKINNY: unset = main (the shared expert one slot per token); 1 = skinny rows first in the grid;
# 2 = skinny rows after the routed slots (session 34's placement, which lost at 2-4 tokens).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
# CudaMoeGroupedNvfp4.DecodeStepsAtFlintSizeMatchOneTokenSteps compares with one-token steps of the slot
# kernels and pinned session 34's bits too: expected to fail with the switch (its reference must change).
for m in 1 2; do
  STRIKER_AB_SHARED_SKINNY=$m timeout 200 $B/test_cuda_kernels \
    --gtest_filter='CudaNvfp4.*:CudaMoe*:CudaBackend.Nvfp4*' > $OUT/tests_mode$m.txt 2>&1
  echo "tests mode $m rc=$? at ${SECONDS}s $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests_mode$m.txt | tr '\n' ' ')"
  grep -E '^\[  FAILED' $OUT/tests_mode$m.txt | head
done
C=$B/config.json
step() {  # step FORMAT CONTEXT BATCH -> device ms/kernels
  local q=""; [ $1 = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 40 $B/striker bench latency --config $C $q --graphs --context $2 --batch $3 --steps 20 --warmup 3 2>&1)
  echo "$(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2; do
  for b in 2 4 8 12 16 20 24; do
    echo "shared skinny nvfp4 ctx1024 b$b: off $(step nvfp4 1024 $b) first $(STRIKER_AB_SHARED_SKINNY=1 step nvfp4 1024 $b) last $(STRIKER_AB_SHARED_SKINNY=2 step nvfp4 1024 $b)"
  done
  echo "shared skinny nvfp4 ctx8192 b8: off $(step nvfp4 8192 8) first $(STRIKER_AB_SHARED_SKINNY=1 step nvfp4 8192 8) last $(STRIKER_AB_SHARED_SKINNY=2 step nvfp4 8192 8)"
done
# Where NVFP4 should leave the per-slot kernels with the shared rows skinny (main: after 24 tokens).
for rep in 1 2; do
  for b in 24 28 32; do
    echo "crossover nvfp4 ctx1024 b$b: main $(step nvfp4 1024 $b) per-slot to 32 $(STRIKER_AB_PERSLOT_NVFP4_MAX=32 step nvfp4 1024 $b) + skinny first $(STRIKER_AB_PERSLOT_NVFP4_MAX=32 STRIKER_AB_SHARED_SKINNY=1 step nvfp4 1024 $b)"
  done
done
STRIKER_AB_ROUTER_SPREAD=24 timeout 120 $B/test_cuda_kernels --gtest_filter='CudaRouter*:CudaBackend.Nvfp4*:CudaBackend.Batched*' \
  > $OUT/tests_router.txt 2>&1
echo "router tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests_router.txt | tr '\n' ' ')"
grep -E '^\[  FAILED' $OUT/tests_router.txt | head
for rep in 1 2; do
  for cb in "nvfp4 9" "nvfp4 16" "nvfp4 24" "bf16 9" "bf16 16"; do set -- $cb
    echo "router one launch $1 ctx1024 b$2: two launches $(step $1 1024 $2) one $(STRIKER_AB_ROUTER_SPREAD=24 step $1 1024 $2)"
  done
done
# Timelines of the 16-sequence step, off and first (where the shared rows' time went).
for ab in 0 1; do
  STRIKER_AB_SHARED_SKINNY=$ab OUT=/tmp/tl$ab STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:1024:16" \
    timeout 120 bash scripts/gpu_profile.sh $B > $OUT/timeline_shared_skinny_$ab.txt 2>&1
  echo "timeline shared skinny=$ab rc=$?"; tail -16 $OUT/timeline_shared_skinny_$ab.txt
done
echo "all done at ${SECONDS}s"
