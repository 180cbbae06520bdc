#!/usr/bin/env bash
# Session 37 run 2 (same payload as run 1 + .gpuwork/striker_main.xz): where the one-multiply E2M1 decode lost at
# one sequence (+0.04..0.06 ms at 8K in run 1) and won at 8+ (-0.08..-0.11): the CUPTI step timelines of main and
# new side by side per kernel family (NVFP4 1 x 8K and 8 x 8K), then two more A/B rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc .gpuwork/striker_main.xz > $B/striker_main && chmod +x $B/striker_main
mkdir -p gpubin_main && for f in $B/*; do ln -sfn "$PWD/$f" gpubin_main/; done && rm gpubin_main/striker && cp $B/striker_main gpubin_main/striker
for arm in main new; do
  d=$B; [ $arm = main ] && d=gpubin_main
  OUT=/tmp/tl_$arm STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:8192:1 nvfp4:8192:8" timeout 120 bash scripts/gpu_profile.sh $d \
    > /tmp/tl_$arm.txt 2>&1
  echo "timelines $arm rc=$? at ${SECONDS}s"; grep -E "ms/step" /tmp/tl_$arm.txt
done
for b in 1 8; do
  python3 scripts/step_timeline.py /tmp/tl_main/timeline_nvfp4_8192_b$b.csv --compare /tmp/tl_new/timeline_nvfp4_8192_b$b.csv \
    "NVFP4 8K batch $b: main (A) vs one-multiply decode (B)" 2>&1 | tee $OUT/compare_b$b.txt | head -40
done
C=$B/config.json
step() {  # step BINARY FORMAT CONTEXT BATCH STEPS -> device ms/kernels
  local q=""; [ $2 = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $B/$1 bench latency --config $C $q --graphs --context $3 --batch $4 --steps $5 --warmup 3 2>&1)
  echo "$(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')"
}
for rep in 1 2; do
  for cb in "8192 1" "100000 1" "8192 8" "1024 4"; do set -- $cb
    echo "nvfp4 ctx$1 b$2: main $(step striker_main nvfp4 $1 $2 50) new $(step striker nvfp4 $1 $2 50)"
  done
done
echo "all done at ${SECONDS}s"
