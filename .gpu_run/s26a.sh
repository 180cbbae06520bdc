#!/usr/bin/env bash
# Session 26 run 1: the batched decode path (9..256 sequences) measured like issue 11's batch 1-8:
# bench latency --graphs per batch size, BF16 and NVFP4; CUPTI timelines at batch 64; ncu sections of
# the NVFP4 grouped expert kernels at batch 64.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for q in bf16 nvfp4; do
  qarg=""; [ $q = nvfp4 ] && qarg="--quantization nvfp4"
  for b in 8 9 16 32 64 128 256; do
    ctx=1024; [ $b = 8 ] && ctx=8192
    r=$(timeout 120 $B/striker bench latency --config $C $qarg --graphs --context $ctx --batch $b --steps 20 --warmup 3 2>&1)
    echo "$q b$b ctx$ctx: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') | $(echo "$r" | grep -oE '[0-9.]+% of the 4.6') | $(echo "$r" | grep -oE 'kernels per step: [0-9]+') | $(echo "$r" | grep -oE 'floor at 4.6 TB/s [0-9.]+ ms') | $(echo "$r" | grep -oE '[0-9]+ distinct experts')"
    echo "$r" | grep -iE "error|abort" | head -3
  done
done
echo "curves done at ${SECONDS}s"
STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:1024:64 bf16:1024:64 nvfp4:1024:16" timeout 300 bash scripts/gpu_profile.sh $B 2>&1 | head -150
echo "timelines done at ${SECONDS}s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 200 "$NCU" --csv --page details --clock-control none --cache-control none -k 'regex:grouped_gemm_kernel' \
  --launch-skip 20 --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats \
  --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  $B/striker bench latency --config $C --quantization nvfp4 --context 1024 --batch 64 --steps 1 --warmup 0 > $OUT/ncu_grouped.csv 2>$OUT/ncu_grouped.err
echo "ncu rc=$?"
grep -E '"(Grid Size|Block Size|Registers Per Thread|Duration|DRAM Throughput|Compute \(SM\) Throughput|L2 Hit Rate|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Executed Ipc Active|No Eligible|Warp Cycles Per Issued Instruction|Dynamic Shared Memory Per Block|Mem Busy)"' $OUT/ncu_grouped.csv | awk -F'","' '{print $5 " | " $(NF-2) " | " $NF}' | tr -d '"' | head -40
echo "all done at ${SECONDS}s"
