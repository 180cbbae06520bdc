#!/usr/bin/env bash
# Session 24, run 1 (ship with STRIKER_SHIP_SERVER=0): session 23's persistent-chain probe with the BF16 8K step as its
# control, then what a step checking n-gram guesses costs (bench latency --speculative-tokens D, one sequence; each
# run also times plain steps in the same process and prints the ratio and the accepted guesses per step that pay).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
timeout 150 $B/bench_cuda_kernels persistent-chain 2>&1 | tail -30; echo "chain rc=${PIPESTATUS[0]} at ${SECONDS}s"
ms() { timeout 60 $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
A="--context=8192" ms | sed 's/^/step BF16 8K: /'
for q in "" "--quantization=nvfp4"; do
  for ctx in 8192 100000; do
    for d in 1 3; do
      echo "spec ${q:-bf16} ctx=$ctx D=$d: $(timeout 120 $B/striker bench latency --config $C --graphs --steps 40 \
        --context=$ctx --speculative-tokens=$d $q 2>&1 | grep -E 'against a plain step' | sed 's/^ *//')"
    done
  done
done
echo "done at ${SECONDS}s"
