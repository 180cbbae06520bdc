#!/usr/bin/env bash
# Session 39 run 1 (kernel payload of the all-live MoE kernels + .gpuwork/striker_base.xz = main 8d22d2c's
# striker, stripped): the NVFP4 / MoE GPU tests, then base vs new (bench latency --graphs, 50 steps, device ms),
# three rounds, then ncu (duration, instructions, issue activity) of the per-slot MoE kernels of one middle layer in
# both arms, at 8 x 8K and 1 x 8K, and both arms' CUPTI step timelines at 8 x 8K and 1 x 8K.
# Payload: on main build striker, strip --strip-all, xz -> striker_base.xz; build the branch, then
# STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_STRIP=all bash scripts/ship_gpu.sh and copy the base into
# .gpuwork/striker_base.xz (ship_gpu.sh clears .gpuwork); carry .gpuwork, unpack into /tmp/c, run from there.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc .gpuwork/striker_base.xz > $B/striker_base && chmod +x $B/striker_base
timeout 300 $B/test_cuda_kernels --gtest_filter="${S39A_FILTER:-CudaNvfp4.*:CudaMoe*:CudaBackend.*Nvfp4*}" > $OUT/kernel_tests.txt 2>&1
echo "kernel tests rc=$? at ${SECONDS}s"
grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $OUT/kernel_tests.txt | head -20
C=$B/config.json
for rep in 1 2 3; do
  for cb in "8192 1" "8192 8" "100000 1" "1024 2" "1024 4" "1024 16"; do set -- $cb
    echo -n "ctx$1 b$2:"
    for bin in striker_base striker; do
      r=$(timeout 90 $B/$bin bench latency --config $C --quantization nvfp4 --graphs --context $1 --batch $2 --steps 50 --warmup 3 2>&1)
      echo -n " $bin $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -m1 -i error)"
    done; echo
  done
done
echo "table done at ${SECONDS}s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread
for batch in 8 1; do
  for k in nvfp4_moe_gate_up_kernel nvfp4_moe_down; do
    for bin in striker_base striker; do
      timeout 120 "$NCU" --clock-control none --cache-control none -k "regex:$k" --launch-skip 24 --launch-count 1 \
        --metrics $M $B/$bin bench latency --config $C --quantization nvfp4 --context 8192 --batch $batch --steps 1 \
        --warmup 0 > $OUT/ncu_${k}_b${batch}_$bin.txt 2>&1
      echo "ncu $k b$batch $bin rc=$?: $(grep -E '^\s+(gpu__time|smsp__inst|smsp__issue|sm__warps|dram__|launch__reg)' $OUT/ncu_${k}_b${batch}_$bin.txt | awk '{print $1"="$NF}' | tr '\n' ' ')"
    done
  done
done
mkdir -p gpubin_base && for f in $B/*; do ln -sfn "$PWD/$f" gpubin_base/; done && rm gpubin_base/striker && cp $B/striker_base gpubin_base/striker
for arm in base new; do
  d=$B; [ $arm = base ] && d=gpubin_base
  OUT=/tmp/tl_$arm STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:8192:8 nvfp4:8192:1" timeout 150 \
    bash scripts/gpu_profile.sh $d > /tmp/tl_$arm.txt 2>&1
  echo "timeline $arm rc=$? at ${SECONDS}s"; grep -E "ms/step" /tmp/tl_$arm.txt
done
for b in 8 1; do
  python3 scripts/step_timeline.py /tmp/tl_base/timeline_nvfp4_8192_b$b.csv --compare /tmp/tl_new/timeline_nvfp4_8192_b$b.csv \
    "NVFP4 8K batch $b: base (A) vs all-live (B)" 2>&1 | tee $OUT/compare_b$b.txt | head -30
done
cp /tmp/tl_base/*.csv $OUT/ 2>/dev/null; for f in /tmp/tl_new/*.csv; do cp $f $OUT/new_$(basename $f); done
echo "all done at ${SECONDS}s"
