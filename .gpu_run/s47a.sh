#!/usr/bin/env bash
# Session 47 run 1: the phases of the one-token decode chain inside the replayed graph — per-CTA stamps
# (a -DSTRIKER_STAMPS=ON build, src/backends/cuda/common/stamps.cuh; scripts/stamps_report.py), NVFP4 and BF16
# at 8K and 100K, beside main's unstamped binary (BASE=striker.xz) for the stamps' own cost.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
C=$B/config.json
BASE_BIN=/tmp/base_striker
xz -dc "$BASE" > $BASE_BIN && chmod +x $BASE_BIN
ms() { echo "$1" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+'; }
for q in nvfp4 bf16; do
  qa=(); [ $q = nvfp4 ] && qa=(--quantization nvfp4)
  for ctx in 8192 100000; do
    r=$(timeout 90 $BASE_BIN bench latency --config $C "${qa[@]}" --graphs --context $ctx --batch 1 --steps 50 --warmup 3 2>&1)
    echo "== $q $ctx: main $(ms "$r") ms $(echo "$r" | grep -m1 -i error)"
    f=$OUT/st_${q}_$ctx.bin
    r=$(STRIKER_STAMPS=$f timeout 120 $B/striker bench latency --config $C "${qa[@]}" --graphs --context $ctx --batch 1 --steps 30 --warmup 3 2>&1)
    echo "   stamped $(ms "$r") ms; $(echo "$r" | grep -E '^stamps:' | tail -1) $(echo "$r" | grep -m1 -i error)"
    python3 scripts/stamps_report.py $f > $OUT/rep_${q}_$ctx.txt 2>&1
    cat $OUT/rep_${q}_$ctx.txt
    rm -f $f
  done
done
# A small file of the last ~5 NVFP4 8K steps to come back (16 MiB a file) for later questions.
STRIKER_STAMPS=$OUT/st_small.bin STRIKER_STAMPS_CAP=260000 timeout 120 $B/striker bench latency --config $C \
  --quantization nvfp4 --graphs --context 8192 --batch 1 --steps 30 --warmup 3 > /dev/null 2>&1
xz -T8 -6 $OUT/st_small.bin; ls -la $OUT
echo "all done at ${SECONDS}s"
