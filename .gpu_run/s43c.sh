#!/usr/bin/env bash
# Session 43 run 3: the probe with lean warp streams (each warp's pieces of a layer from a table built once;
# every warp-stream kernel now publishes its op ends from a 17th warp) beside run 2's warp streams; then ncu
# stall reasons and instruction counts of four launches of warp_stream_chain_kernel (launch order: warp
# streams BF16 0-128, NVFP4 129-257, lean BF16 258-386, lean NVFP4 387-515; per transport 4 checks, then
# 5 rows x 25): 90 = BF16 L2-resident no dots, 140 = NVFP4 own routing, 348 / 401 = the same rows, lean.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
timeout 300 $B/bench_cuda_kernels persistent-chain 2>&1 | tee $OUT/probe.txt
echo "probe rc=$? at ${SECONDS}s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M='gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__cycles_active.avg,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for skip in 90 140 348 401; do
  [ $SECONDS -gt 480 ] && break
  timeout 120 "$NCU" --clock-control none -k regex:warp_stream_chain_kernel --launch-skip $skip --launch-count 1 \
    --metrics "$M" $B/bench_cuda_kernels persistent-chain > $OUT/ncu_$skip.txt 2>&1
  echo "ncu skip $skip rc=$? at ${SECONDS}s"
  grep -E '^\s+(gpu__time|smsp__inst|smsp__issue|smsp__cycles|smsp__average)' $OUT/ncu_$skip.txt | awk '$NF+0 > 0.1 || /gpu__time|inst_exec|issue_active|cycles_active/ {print $1"="$NF}' | tr '\n' ' '; echo
done
echo "all done at ${SECONDS}s"
