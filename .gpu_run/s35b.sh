#!/usr/bin/env bash
# Session 35 run 2 (kernel payload of branch s35-perslot; with STRIKER_AB_PERSLOT_MAX unset it is main at
# 65df8b8, the shared expert in the grouped tiles): (1) A/B — the MoE of 9-16-token steps on the per-slot decode
# kernels (STRIKER_AB_PERSLOT_MAX=12 / 16) against the grouped path; (2) the issue-11 cases; (3) every GPU kernel
# test and the conformance run on main's behaviour (.gpu_run/s31d.sh), beside the per-slot arm's backend and
# MoE tests with STRIKER_AB_PERSLOT_MAX=16.
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
  for cb in "nvfp4 9" "nvfp4 12" "nvfp4 16" "bf16 9" "bf16 12" "bf16 16" "nvfp4 8"; do
    set -- $cb
    echo "per-slot max $1 ctx1024 b$2: 8 $(step $1 1024 $2 20) | 12 $(STRIKER_AB_PERSLOT_MAX=12 step $1 1024 $2 20) | 16 $(STRIKER_AB_PERSLOT_MAX=16 step $1 1024 $2 20)"
  done
done
echo "ab done at ${SECONDS}s"
for f in bf16 nvfp4; do for cb in "8192 1" "100000 1" "8192 8"; do set -- $cb
  echo "issue11 $f ctx$1 b$2: $(step $f $1 $2 50)"; done; done
echo "issue11 done at ${SECONDS}s"
( STRIKER_AB_PERSLOT_MAX=16 timeout 400 $B/test_cuda_kernels --gtest_filter='CudaBackend.*:CudaMoe.*:CudaNvfp4.Selected*' \
    > $OUT/perslot16_tests.txt 2>&1; echo "per-slot 16 tests rc=$? at ${SECONDS}s $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/perslot16_tests.txt | tr '\n' ' ')" ) &
S31D_LIMIT=420 bash .gpu_run/s31d.sh
wait
grep -E '^\[  FAILED' $OUT/perslot16_tests.txt | head
echo "all done at ${SECONDS}s"
