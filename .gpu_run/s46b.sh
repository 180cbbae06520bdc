#!/usr/bin/env bash
# Session 46 run 3: where the one-token sliding-window attention cluster kernel (8.3 us of the 1 x 8K NVFP4 chain per
# sliding layer, 11.7-12.7 us alone for ~1.1 MB) and the router (4.8 / 8.1 us for 1.06 MB) spend their time:
# ncu warp-state, scheduler, launch and source-counter sections of one launch each (a middle layer), then the
# SASS lines with the most stall samples.
cd "$(dirname "$0")/.."
source .gpu_run/env.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
$NCU --version | tail -1
for k in attention_pipe_cluster_kernel router_spread_kernel; do
  timeout 150 "$NCU" --clock-control none --cache-control none -k "regex:$k" --launch-skip 12 --launch-count 1 \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
    --section SourceCounters --section SpeedOfLight --section MemoryWorkloadAnalysis --import-source no \
    -o $OUT/prof_$k $B/striker bench latency --config $C --quantization nvfp4 --context 8192 --batch 1 --steps 1 --warmup 0 \
    > $OUT/ncu_$k.log 2>&1
  echo "== $k rc=$?"
  "$NCU" -i $OUT/prof_$k.ncu-rep --print-details all > $OUT/details_$k.txt 2>&1
  grep -E 'Duration|Registers Per|Block Size|Grid Size|Cluster Size|Achieved Occupancy|Issued Warp Per|No Eligible|Warp Cycles Per Issued|Stall|Executed Instructions  |Memory Throughput|DRAM Throughput' \
    $OUT/details_$k.txt | grep -v -i 'est\. speedup' | head -40
  "$NCU" -i $OUT/prof_$k.ncu-rep --page source --print-source sass --csv > $OUT/sass_$k.csv 2>&1
  echo "sass page rc=$? lines $(wc -l < $OUT/sass_$k.csv)"; head -2 $OUT/sass_$k.csv | cut -c1-600
done
echo "all done at ${SECONDS}s"
