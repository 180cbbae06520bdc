#!/usr/bin/env bash
# Session 33: the issue-11 table with bench latency timing the served step (forward_sampled, greedy draws on the
# device; session 32's change, first GPU run), the batched NVFP4 steps at 16 / 64 sequences (expected ~-1.5 ms
# device at 64 from the logits copy gone), then CUPTI timelines of the batch-8 steps (BF16 and NVFP4, 8K) to
# find what holds batch 8 at 60 % / 31 % of the roofline. Kernel payload with the trace library
# (STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_STRIP=all bash scripts/ship_gpu.sh). ~1 min.
# S33C_TIMELINES=0: the table only (.gpu_run/s31c.sh runs it so, before the served benchmark).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
C=$B/config.json
for q in "" "--quantization nvfp4"; do
  for cb in "8192 1" "100000 1" "8192 8"; do
    set -- $cb
    r=$(timeout 60 $B/striker bench latency --config $C $q --graphs --context $1 --batch $2 --steps 50 --warmup 3 2>&1)
    echo "$r" > "$OUT/lat_${q:+nv}_$1_$2.txt"
    echo "${q:-bf16} ctx$1 b$2: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') | $(echo "$r" | grep -oE '[0-9.]+% of the 4.6') | $(echo "$r" | grep -oE 'kernels per step: [0-9]+')$(echo "$r" | grep -m1 -i error)"
  done
done
for b in 16 64; do
  r=$(timeout 60 $B/striker bench latency --config $C --quantization nvfp4 --graphs --context 1024 --batch $b --steps 20 --warmup 3 2>&1)
  echo "nvfp4 ctx1024 b$b: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)')$(echo "$r" | grep -m1 -i error)"
done
echo "table done at ${SECONDS}s"
[ "${S33C_TIMELINES:-1}" = 1 ] || exit 0
STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="bf16:8192:8 nvfp4:8192:8" timeout 300 bash scripts/gpu_profile.sh $B > $OUT/timelines.txt 2>&1
echo "timelines rc=$? at ${SECONDS}s"
grep -E 'timeline|^\|' $OUT/timelines.txt | head -80
