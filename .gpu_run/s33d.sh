#!/usr/bin/env bash
# Session 33: the landed rules (two token groups per skinny CTA from 24 tokens; the 16-row NVFP4 down on
# wide register fragments below 192 pairs, resident-A from) verified — every GPU kernel test beside
# scripts/gpu_conformance.sh (.gpu_run/s31d.sh) — then the batched NVFP4 steps at 1K context. Kernel payload.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S31D_LIMIT=480 bash .gpu_run/s31d.sh
C=$B/config.json
for b in 9 16 24 32 64; do
  r=$(timeout 40 $B/striker bench latency --config $C --quantization nvfp4 --graphs --context 1024 --batch $b --steps 20 --warmup 3 2>&1)
  echo "nvfp4 1K b$b: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)')$(echo "$r" | grep -m1 -i error)"
done
echo "all done at ${SECONDS}s"
