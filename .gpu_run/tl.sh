#!/usr/bin/env bash
# Session 19: step timelines (batch 1 and batch 8, both formats, 8K) of main.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:8192:1 nvfp4:8192:8 bf16:8192:8 bf16:8192:1" bash scripts/gpu_profile.sh $B > $OUT/tl.txt 2>&1; grep -E "^==|ms/step|sum of" $OUT/tl.txt
echo "done at ${SECONDS}s"
