#!/usr/bin/env bash
# Session 43 run 4: main's issue-11 table on the card lent (meant for an H200: the targets are the H200's) —
# bench latency --graphs, 50 steps, device ms / kernels per step, two rounds.
cd "$(dirname "$0")/.."
source .gpu_run/env.sh
run() {  # ctx batch [quantization args]
  local ctx=$1 b=$2; shift 2
  r=$(timeout 90 $B/striker bench latency --config $C "$@" --graphs --context $ctx --batch $b --steps 50 --warmup 3 2>&1)
  echo -n " $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2; do
  for cb in "8192 1" "100000 1" "8192 8"; do set -- $cb
    echo -n "nvfp4 ctx$1 b$2:"; run $1 $2 --quantization nvfp4; echo
    echo -n "bf16 ctx$1 b$2:"; run $1 $2; echo
  done
done
echo "all done at ${SECONDS}s"
