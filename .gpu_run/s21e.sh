#!/usr/bin/env bash
# Session 21, run 6: the cut path with per-warp histograms of plain shared atomics: CudaSampling.*, timing rows, and each
# kernel's duration in one sample_rows call (top_p=0.9, 1 and 64 rows).
set -uo pipefail
cd "$(dirname "$0")/.."
bash .gpu_run/s21b.sh
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
T="$B/test_cuda_kernels --gtest_filter=CudaSampling.PrintsTimingAtFlintSize"
for sk in 264 341; do
  timeout 120 $NCU --clock-control none --cache-control none --kernel-name 'regex:candidates_kernel|cut_digit|race_kernel|sample_kernel' \
    --launch-skip $sk --launch-count 7 --metrics gpu__time_duration.sum,smsp__inst_executed.sum --csv $T > $L/dur_$sk.csv 2>&1
  echo "== skip $sk rc=$?"; grep -E 'gpu__time|inst_exec' $L/dur_$sk.csv | awk -F'","' '{print $5" | "$(NF-2)" | "$(NF)}' | sed -E 's/\(const float.*\)//' | head -30
done
