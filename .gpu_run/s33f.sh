#!/usr/bin/env bash
# Session 33, main after the landed rules: the issue-11 rows the skinny-kernel refactor could touch (batch 8: the
# dense projections of 2-8 tokens run the one-group kernel built from the new template; batch 1 as control), then
# CUPTI timelines of the 16- and 32-sequence NVFP4 steps (1K context) to see where the batched step goes now.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
C=$B/config.json
for q in "" "--quantization nvfp4"; do
  for cb in "8192 1" "8192 8"; do
    set -- $cb
    r=$(timeout 60 $B/striker bench latency --config $C $q --graphs --context $1 --batch $2 --steps 50 --warmup 3 2>&1)
    echo "${q:-bf16} ctx$1 b$2: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') | $(echo "$r" | grep -oE '[0-9.]+% of the 4.6') | $(echo "$r" | grep -oE 'kernels per step: [0-9]+')$(echo "$r" | grep -m1 -i error)"
  done
done
T=/tmp/tl; mkdir -p $T
OUT=$T STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:1024:16 nvfp4:1024:32" timeout 300 bash scripts/gpu_profile.sh $B > $OUT/timelines.txt 2>&1
echo "timelines rc=$? at ${SECONDS}s"
