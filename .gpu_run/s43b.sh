#!/usr/bin/env bash
# Session 43 run 2: why the warp-stream transport is slow even from a 4 MiB L2 window without dots —
# ncu stall reasons of two launches of warp_stream_chain_kernel: BF16 "L2-resident, no dots" (its 91st
# launch: 4 checks + 3 rows x 25 + 12) and NVFP4 "own routing" (launch 141).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M='gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__cycles_active.avg,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for skip in 90 140; do
  timeout 200 "$NCU" --clock-control none -k regex:warp_stream_chain_kernel --launch-skip $skip --launch-count 1 \
    --metrics "$M" $B/bench_cuda_kernels persistent-chain > $OUT/ncu_$skip.txt 2>&1
  echo "ncu skip $skip rc=$? at ${SECONDS}s"
  grep -E '^\s+(gpu__time|smsp__inst|smsp__issue|smsp__cycles|smsp__average)' $OUT/ncu_$skip.txt | awk '$NF+0 > 0.05 || /gpu__time|inst_exec|issue_active|cycles_active/ {print $1"="$NF}'
done
echo "all done at ${SECONDS}s"
