#!/usr/bin/env bash
# Session 47 run 1: the phases of the one-token decode chain inside the replayed graph — per-CTA stamps
# (a -DSTRIKER_STAMPS=ON build, src/backends/cuda/common/stamps.cuh; scripts/stamps_report.py), NVFP4 and BF16
# at 8K and 100K, beside main's unstamped binary (BASE=striker.xz) for the stamps' own cost.
cd "$(dirname "$0")/.."
source .gpu_run/env.sh
BASE_BIN=/tmp/base_striker
xz -dc "$BASE" > $BASE_BIN && chmod +x $BASE_BIN
ms() { echo "$1" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+'; }
for case in "nvfp4 8192" "bf16 8192" "nvfp4 100000" "bf16 100000"; do set -- $case
  q=$1 ctx=$2
  qa=(); [ $q = nvfp4 ] && qa=(--quantization nvfp4)
  if [ $ctx = 8192 ]; then
    r=$(timeout 90 $BASE_BIN bench latency --config $C "${qa[@]}" --graphs --context $ctx --batch 1 --steps 50 --warmup 3 2>&1)
    echo "== $q $ctx: main $(ms "$r") ms $(echo "$r" | grep -m1 -i error)"
  fi
  f=/tmp/st_${q}_$ctx.bin
  r=$(STRIKER_STAMPS=$f timeout 120 $B/striker bench latency --config $C "${qa[@]}" --graphs --context $ctx --batch 1 --steps 30 --warmup 3 2>&1)
  echo "== $q $ctx stamped $(ms "$r") ms; $(echo "$r" | grep -E '^stamps:' | tail -1) $(echo "$r" | grep -m1 -i error)"
  python3 ${REPORT:-scripts/stamps_report.py} $f > $OUT/rep_${q}_$ctx.txt 2>&1
  cat $OUT/rep_${q}_$ctx.txt
  if [ $q$ctx = nvfp48192 ]; then  # the last ~5 steps' records come back (16 MiB a file) for later questions
    python3 - $f $OUT/st_nvfp4_8192_tail.bin <<'PY'
import sys, numpy as np
with open(sys.argv[1], "rb") as f:
    w, n = np.frombuffer(f.read(8), np.uint32); r = np.frombuffer(f.read(), np.uint64).reshape(int(n), int(w))
r = r[np.argsort(r[:, 1])][-260000:]
with open(sys.argv[2], "wb") as f:
    f.write(np.array([w, len(r)], np.uint32).tobytes()); f.write(r.tobytes())
PY
    xz -T8 -6 $OUT/st_nvfp4_8192_tail.bin
  fi
  rm -f $f
  echo "   at ${SECONDS}s"
done
ls -la $OUT
echo "all done at ${SECONDS}s"
