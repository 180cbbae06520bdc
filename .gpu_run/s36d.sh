#!/usr/bin/env bash
# Prepared in session 36 (not run: no device time left), for session 37 (kernel payload, main): the profile the next NVFP4 batch-8 change is predicted from — the
# step's CUPTI timeline (NVFP4 8 x 8K, per kernel share) and ncu's sections for the per-slot MoE gate/up and down
# kernels of one middle layer of that step (stream launches, each kernel replayed alone).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
OUT=$OUT/tl STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:8192:8 nvfp4:8192:1" timeout 150 bash scripts/gpu_profile.sh $B \
  > $OUT/timelines.txt 2>&1
echo "timelines rc=$? at ${SECONDS}s"; grep -B2 -A12 "one layer" $OUT/timelines.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for k in nvfp4_moe_gate_up_kernel nvfp4_moe_down_slots_mma_kernel; do
  timeout 150 "$NCU" --clock-control none --cache-control none -k "regex:$k" --launch-skip 24 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis \
    $B/striker bench latency --config $B/config.json --quantization nvfp4 --context 8192 --batch 8 --steps 1 --warmup 0 \
    > $OUT/ncu_$k.txt 2>&1
  echo "ncu $k rc=$? at ${SECONDS}s"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|No Eligible|Issued Warp|Eligible Warps|Active Warps Per|Block Limit|Executed Ipc|Warp Cycles Per Issued|L2 Hit|L1/TEX Hit|Grid Size|Waves Per SM|Stall|Executed Instructions  " $OUT/ncu_$k.txt | head -40
done
echo "all done at ${SECONDS}s"
