#!/usr/bin/env bash
# Session 38 run 2 (kernel payload of the staged-activation down-slots branch + .gpuwork/striker_base.xz = main
# 58e53ed's striker, stripped): the NVFP4 and MoE GPU tests (S38B_FILTER) and the NVFP4 backend forward tests, then
# base vs branch (bench latency --graphs, 50 steps, device ms), 3 rounds, both arms' CUPTI timelines at 8 x 8K, then ncu
# of the branch's per-slot down kernel.
# Prepared in session 38, not run (the device could not be started again). Payload: on main, build striker, strip it
# (strip --strip-all) and xz it as the base; `git apply .gpu_run/s38_down_staged.patch`, build everything, then
# STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_STRIP=all bash scripts/ship_gpu.sh and copy the base into
# .gpuwork/striker_base.xz (ship_gpu.sh clears .gpuwork); carry .gpuwork, unpack into /tmp/c, run from there.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc .gpuwork/striker_base.xz > $B/striker_base && chmod +x $B/striker_base
timeout 300 $B/test_cuda_kernels --gtest_filter="${S38B_FILTER:-CudaNvfp4.*:CudaMoe*:CudaBackend.*Nvfp4*}" > $OUT/kernel_tests.txt 2>&1
echo "kernel tests rc=$? at ${SECONDS}s"
grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $OUT/kernel_tests.txt | head -20
C=$B/config.json
for rep in 1 2 3; do
  for cb in "8192 1" "8192 8" "1024 2" "1024 4" "1024 16"; do set -- $cb
    echo -n "ctx$1 b$2:"
    for bin in striker_base striker; do
      r=$(timeout 60 $B/$bin bench latency --config $C --quantization nvfp4 --graphs --context $1 --batch $2 --steps 50 --warmup 3 2>&1)
      echo -n " $bin $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -m1 -i error)"
    done; echo
  done
done
echo "table done at ${SECONDS}s"
mkdir -p gpubin_base && for f in $B/*; do ln -sfn "$PWD/$f" gpubin_base/; done && rm gpubin_base/striker && cp $B/striker_base gpubin_base/striker
for arm in base new; do
  d=$B; [ $arm = base ] && d=gpubin_base
  OUT=/tmp/tl_$arm STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:8192:8" timeout 90 bash scripts/gpu_profile.sh $d \
    > /tmp/tl_$arm.txt 2>&1
  echo "timeline $arm rc=$? at ${SECONDS}s"; grep -E "ms/step" /tmp/tl_$arm.txt
done
python3 scripts/step_timeline.py /tmp/tl_base/timeline_nvfp4_8192_b8.csv --compare /tmp/tl_new/timeline_nvfp4_8192_b8.csv \
  "NVFP4 8K batch 8: base (A) vs staged down (B)" 2>&1 | tee $OUT/compare_b8.txt | head -30
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
k=nvfp4_moe_down_slots_mma_kernel
timeout 120 "$NCU" --clock-control none --cache-control none -k "regex:$k" --launch-skip 24 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
  --section InstructionStats $B/striker bench latency --config $C --quantization nvfp4 --context 8192 --batch 8 --steps 1 \
  --warmup 0 > $OUT/ncu_down.txt 2>&1
echo "ncu $k rc=$? at ${SECONDS}s"
grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|No Eligible|Issued Warp|Eligible Warps|Warp Cycles Per Issued|Waves Per SM|Executed Instructions  |Block Limit Reg" $OUT/ncu_down.txt | head -20
echo "all done at ${SECONDS}s"
