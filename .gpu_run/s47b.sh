#!/usr/bin/env bash
# Session 47's prepared router change (the one-token norm by the whole CTA; `git revert` of its revert brings it
# back): its router tests, then bench latency A/B against main's binary (BASE=striker.xz), two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
C=$B/config.json
xz -dc "$BASE" > /tmp/base_striker && chmod +x /tmp/base_striker
timeout 200 $B/test_cuda_kernels --gtest_filter='CudaRouter*:CudaBackend*:CudaMoe*' 2>&1 | tail -4
ms() { echo "$1" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+'; }
for rep in 1 2; do
  for case in "nvfp4 8192" "nvfp4 100000" "bf16 8192"; do set -- $case
    qa=(); [ $1 = nvfp4 ] && qa=(--quantization nvfp4)
    a=$(timeout 90 /tmp/base_striker bench latency --config $C "${qa[@]}" --graphs --context $2 --batch 1 --steps 50 --warmup 3 2>&1)
    b=$(timeout 90 $B/striker bench latency --config $C "${qa[@]}" --graphs --context $2 --batch 1 --steps 50 --warmup 3 2>&1)
    echo "$1 $2: main $(ms "$a") / router block norm $(ms "$b") ms"
  done
done
echo "all done at ${SECONDS}s"
