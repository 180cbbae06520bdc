#!/usr/bin/env bash
# Session 21, run 3: where the cut path's time goes (ncu on the timing test's top_p=0.9 rows: 1 row and 256 rows).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
mkdir -p "${OUT:-/tmp/out}"; L=${OUT:-/tmp/out}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
prof() {  # name regex skip count
  timeout 200 $NCU --clock-control none --cache-control none --kernel-name "regex:$2" --launch-skip $3 --launch-count $4 --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats \
    $B/test_cuda_kernels --gtest_filter='CudaSampling.PrintsTimingAtFlintSize' > $L/ncu_$1.txt 2>&1
  echo "== $1 rc=$?"
  grep -E '^  [a-z_]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Issued Warp|No Eligible|Stall|Warp Cycles Per Issued|Grid Size|Block Size' $L/ncu_$1.txt | sed -E 's/ +/ /g' | head -60
}
prof digit1 cut_digit 0 4
prof digit256 cut_digit 88 4
prof race1 race_kernel 66 1
prof race256 race_kernel 88 1
prof cand256 candidates_kernel 121 1
echo "done at ${SECONDS}s"
