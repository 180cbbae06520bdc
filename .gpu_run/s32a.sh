#!/usr/bin/env bash
# Session 32 run 1 (kernel payload of branch s32-skinny = main + .gpu_run/s31_skinny.patch, trace library on):
# session 31's two prepared questions in one call — s31f.sh (NVFP4 dense projections of 9-64 tokens on the skinny
# kernels, A/B with STRIKER_AB_NVFP4_SKINNY) and s31e.sh (CUPTI timelines of the batched steps), plus the
# 16-sequence NVFP4 timeline with the skinny arm.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
bash .gpu_run/s31f.sh
echo "=== timelines (main's rule) at ${SECONDS}s"
bash .gpu_run/s31e.sh
echo "=== 16 sequences, skinny<=64 timeline at ${SECONDS}s"
mkdir -p $OUT/sk
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=$OUT/sk STRIKER_AB_NVFP4_SKINNY=64 STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:1024:16" \
  timeout 150 bash scripts/gpu_profile.sh $B 2>&1 | grep -vE "^ncu not found" | tail -30
python3 scripts/step_timeline.py $OUT/timeline_nvfp4_1024_b16.csv --compare $OUT/sk/timeline_nvfp4_1024_b16.csv \
  "NVFP4 16 seqs: dequant+cuBLASLt (A) vs skinny (B)" 2>&1 | head -40
echo "all done at ${SECONDS}s"
