#!/usr/bin/env bash
# Session 33 (A/B, branch s33split): how many splits should a one-token sliding layer (513 keys) take?
# STRIKER_AB_SLIDING_SPLITS caps the split count of sliding layers (unset: NVFP4 5, BF16 the planner's 9).
# Question: if one split (one CTA per KV head, 9 key steps in a row) costs no more than 5 splits + the combine's
# ~1.7 us, a combine-free epilogue for one split removes 35 launches per step and ~1.7 us per sliding layer.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
C=$B/config.json
for rep in 1 2; do
  for q in "" "--quantization nvfp4"; do
    line="${q:-bf16} 8K b1:"
    for v in def 1 2 3 5 9; do
      if [ $v = def ]; then unset STRIKER_AB_SLIDING_SPLITS; else export STRIKER_AB_SLIDING_SPLITS=$v; fi
      r=$(timeout 40 $B/striker bench latency --config $C $q --graphs --context 8192 --batch 1 --steps 50 --warmup 3 2>&1)
      line="$line s$v $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')$(echo "$r" | grep -m1 -i error)"
    done
    unset STRIKER_AB_SLIDING_SPLITS
    echo "$line"
  done
done
echo "all done at ${SECONDS}s"
