#!/usr/bin/env bash
# Session 37 run 1 (kernel payload with STRIKER_SHIP_TRACE=1, + .gpuwork/striker_main.xz = main 05f987c's binary):
# the E2M1 pair decode by one multiply (nvfp4_bits.h: AND, IMAD, AND per pair instead of two shifts and two logic
# ops; the same bits). Every GPU kernel test beside scripts/gpu_conformance.sh on the new build (also the first GPU
# run of the C++20 build), then main vs new on the NVFP4 cases, the BF16 issue-11 cases once, and the NVFP4 8 x 8K
# and 1 x 8K step timelines of the new build, and ncu sections of the per-slot gate/up (session 36's s36d).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc .gpuwork/striker_main.xz > $B/striker_main && chmod +x $B/striker_main
( timeout 380 $B/test_cuda_kernels > $OUT/kernel_tests.txt 2>&1; echo "kernel tests rc=$? at ${SECONDS}s" ) &
( timeout 380 bash scripts/gpu_conformance.sh $B > $OUT/conformance.txt 2>&1; echo "conformance rc=$? at ${SECONDS}s" ) &
wait
grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $OUT/kernel_tests.txt | head -20
grep -c "^\[       OK" $OUT/kernel_tests.txt; grep "^\[ RUN" $OUT/kernel_tests.txt | tail -1
tail -14 $OUT/conformance.txt
C=$B/config.json
step() {  # step BINARY FORMAT CONTEXT BATCH STEPS -> device ms/kernels
  local q=""; [ $2 = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $B/$1 bench latency --config $C $q --graphs --context $3 --batch $4 --steps $5 --warmup 3 2>&1)
  echo "$(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -oE 'at [0-9.]+% of it' | sed 's/at / card /;s/ of it//')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2; do
  for cb in "8192 8" "1024 16" "1024 28" "8192 1" "100000 1"; do set -- $cb
    echo "nvfp4 ctx$1 b$2: main $(step striker_main nvfp4 $1 $2 50) new $(step striker nvfp4 $1 $2 50)"
  done
done
for cb in "8192 1" "100000 1" "8192 8"; do set -- $cb; echo "bf16 ctx$1 b$2: new $(step striker bf16 $1 $2 50)"; done
echo "table done at ${SECONDS}s"
[ $SECONDS -gt 480 ] && exit 0
OUT=$OUT/tl STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:8192:8 nvfp4:8192:1" timeout 90 bash scripts/gpu_profile.sh $B \
  > $OUT/timelines.txt 2>&1
echo "timelines rc=$? at ${SECONDS}s"; grep -B2 -A14 "one layer" $OUT/timelines.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for k in nvfp4_moe_gate_up_kernel; do
  [ $SECONDS -gt 540 ] && break
  timeout 50 "$NCU" --clock-control none --cache-control none -k "regex:$k" --launch-skip 24 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis \
    $B/striker bench latency --config $C --quantization nvfp4 --context 8192 --batch 8 --steps 1 --warmup 0 \
    > $OUT/ncu_$k.txt 2>&1
  echo "ncu $k rc=$? at ${SECONDS}s"
  grep -E "Duration|DRAM Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|No Eligible|Issued Warp|Eligible Warps|Executed Ipc|Warp Cycles Per Issued|L2 Hit|Waves Per SM|Stall|Executed Instructions  " $OUT/ncu_$k.txt | head -40
done
echo "all done at ${SECONDS}s"
