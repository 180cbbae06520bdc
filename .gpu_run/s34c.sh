#!/usr/bin/env bash
# Session 34: main with the attention front inside the split kernel at 2-64 sequences and the wide NVFP4
# launches' two token groups from 9 tokens, verified — every GPU kernel test beside scripts/gpu_conformance.sh
# (.gpu_run/s31d.sh) — then the issue-11 cases and the batched NVFP4 steps at 1K. Kernel payload.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S31D_LIMIT=400 bash .gpu_run/s31d.sh
C=$B/config.json
step() {  # step FORMAT CONTEXT BATCH STEPS
  local q=""; [ $1 = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $B/striker bench latency --config $C $q --graphs --context $2 --batch $3 --steps $4 --warmup 3 2>&1)
  echo "$1 ctx$2 b$3: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') $(echo "$r" | grep -oE 'kernels per step: [0-9]+') $(echo "$r" | grep -oE '[0-9.]+% of the 4.6' | head -1)$(echo "$r" | grep -m1 -i error)"
}
for f in bf16 nvfp4; do step $f 8192 1 50; step $f 100000 1 50; step $f 8192 8 50; done
for b in 2 4 9 16 64; do step nvfp4 1024 $b 20; done
echo "all done at ${SECONDS}s"
