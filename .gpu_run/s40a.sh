#!/usr/bin/env bash
# Session 40 (run of session 39's prepared s39d plus arm D): A main, B one pair per lane, C = B at 3 CTAs per SM, D = main + the skinny one-round patch (.gpu_run/s39_skinny_one_round.patch).
# three forms — A main's all-live form (session 39's landed change), B one chunk pair per lane as the only form of the
# Flint-width instances (no loop, no refills: 106-117 registers, still 2 CTAs per SM), C = B held to 3 CTAs per SM
# (80 registers, 8-16 bytes of stack). The per-slot MoE GPU tests on C's build, then A / B / C (bench latency --graphs,
# 50 steps, device ms), three rounds, then ncu of the gate/up of one middle layer at 8 x 8K in each arm.
# Payload: on main build striker, strip --strip-all, xz -> /tmp/striker_A.xz; `git apply .gpu_run/s39_gate_up_one_pair.patch`,
# change nvfp4_moe.cu's `__launch_bounds__(kWarps * 32, kOnePair ? 3 : 2)` to `(kWarps * 32, 2)`, build, strip + xz ->
# /tmp/striker_B.xz; restore the line, build everything (arm C), then STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0
# STRIKER_SHIP_STRIP=all STRIKER_SHIP_TRACE=0 bash scripts/ship_gpu.sh and copy both .xz into .gpuwork/ (ship_gpu.sh
# clears it); carry .gpuwork, unpack the payload into /tmp/c, copy .gpu_run/*.sh and the two .xz there, run from there.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
for a in A B D; do xz -dc .gpuwork/striker_$a.xz > $B/striker_$a && chmod +x $B/striker_$a; done
cp $B/striker $B/striker_C
xz -dc .gpuwork/test_cuda_kernels_D.xz > $B/test_cuda_kernels_D && chmod +x $B/test_cuda_kernels_D
timeout 90 $B/test_cuda_kernels --gtest_filter="${S39D_FILTER:-CudaNvfp4.Selected*:CudaMoeGroupedNvfp4.DecodeSteps*}" > $OUT/kernel_tests.txt 2>&1
echo "kernel tests rc=$? at ${SECONDS}s"
grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $OUT/kernel_tests.txt | head -20
timeout 200 $B/test_cuda_kernels_D --gtest_filter="CudaNvfp4.*:CudaMoeGroupedNvfp4.*" > $OUT/kernel_tests_D.txt 2>&1
echo "kernel tests D rc=$? at ${SECONDS}s"
grep -E "^\[  FAILED|^\[==========\] [0-9]+ tests|^\[  PASSED" $OUT/kernel_tests_D.txt | head -20
C=$B/config.json
for rep in 1 2 3; do
  for cb in "8192 8" "8192 1" "100000 1" "1024 2" "1024 4" "1024 16"; do set -- $cb
    echo -n "ctx$1 b$2:"
    for bin in striker_A striker_B striker_C striker_D; do
      r=$(timeout 90 $B/$bin bench latency --config $C --quantization nvfp4 --graphs --context $1 --batch $2 --steps 50 --warmup 3 2>&1)
      echo -n " ${bin#striker_} $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')$(echo "$r" | grep -m1 -i error)"
    done; echo
  done
done
echo "table done at ${SECONDS}s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
for bin in striker_A striker_B striker_C striker_D; do
  timeout 40 "$NCU" --clock-control none --cache-control none -k "regex:nvfp4_moe_gate_up_kernel" --launch-skip 24 --launch-count 1 \
    --metrics $M $B/$bin bench latency --config $C --quantization nvfp4 --context 8192 --batch 8 --steps 1 \
    --warmup 0 > $OUT/ncu_$bin.txt 2>&1
  echo "ncu $bin rc=$?: $(grep -E '^\s+(gpu__time|smsp__inst|smsp__issue|sm__warps|launch__reg)' $OUT/ncu_$bin.txt | awk '{print $1"="$NF}' | tr '\n' ' ')"
done
echo "all done at ${SECONDS}s"
for bin in striker_A striker_D; do
  timeout 40 "$NCU" --clock-control none --cache-control none -k "regex:nvfp4_skinny" --launch-skip 24 --launch-count 2 \
    --metrics $M $B/$bin bench latency --config $C --quantization nvfp4 --context 8192 --batch 8 --steps 1 \
    --warmup 0 > $OUT/ncu_skinny_$bin.txt 2>&1
  echo "ncu skinny $bin rc=$?: $(grep -E '^\s+(gpu__time|smsp__inst|launch__reg)|^  [a-z_]+.*\(' $OUT/ncu_skinny_$bin.txt | awk '{print $1"="$NF}' | tr '\n' ' ')"
done
echo "skinny ncu done at ${SECONDS}s"
