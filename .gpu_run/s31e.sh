#!/usr/bin/env bash
# Prepared in session 31 (no device time left), for the next session: where the batched NVFP4 decode step's time
# goes (the question docs/performance.md's thirty-first session asks: how much of a 16- / 64-sequence NVFP4 step is the
# dense projections' dequantisation into cuBLASLt's scratch). CUPTI timelines of `bench latency --graphs` at 1K context:
# NVFP4 16 and 64 sequences, BF16 64 (control). ~2 minutes.
# Payload: STRIKER_SHIP_SERVER=0 STRIKER_SHIP_KERNEL_TESTS=0 STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_STRIP=all
# bash scripts/ship_gpu.sh (the trace library travels by default); carry .gpuwork, unpack into /tmp/c, run from there.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:1024:16 nvfp4:1024:64 bf16:1024:64" \
  timeout 500 bash scripts/gpu_profile.sh $B 2>&1 | grep -vE "^ncu not found"
python3 scripts/step_timeline.py $OUT/timeline_bf16_1024_b64.csv --compare $OUT/timeline_nvfp4_1024_b64.csv \
  "BF16 (A) vs NVFP4 (B), 64 sequences at 1K" 2>&1 | head -40
