#!/usr/bin/env bash
# Session 22, run 2: the decode attention's split count in waves (STRIKER_AB_ATTN_WAVES: 1 = main's one wave of
# 2 CTAs per SM, 2 and 3 = two and three waves of the same CTAs): is the full layers' 0.76 of the roofline at 100K
# the one wave's tail (CTAs with equal shares finishing at different times)?
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json; L=${OUT:-/tmp/out}; mkdir -p $L
ms() { timeout 40 $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | head -1 | cut -c1-110; }
for round in 1 2; do
  for A in "--context=100000" "--context=100000 --quantization nvfp4" "--context=8192" "--context=8192 --quantization nvfp4" "--context=8192 --batch 8 --quantization nvfp4"; do
    for W in 1 2 3; do echo "r$round W=$W $A: $(STRIKER_AB_ATTN_WAVES=$W ms)"; done
  done
done
echo "A/B done at ${SECONDS}s"
for W in 1 2; do
  STRIKER_AB_ATTN_WAVES=$W OUT=$L/w$W STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="bf16:100000" timeout 120 bash scripts/gpu_profile.sh $B 2>&1 | grep -iE 'attention|combine|step|total' | head -12
done
echo "all done at ${SECONDS}s"
