#!/usr/bin/env bash
# Session 40 run 2: A = main (striker_A.xz), E1 = main + the per-slot gate/up one-pair form (3 CTAs per SM
# with the skinny shared expert, 2 below), E2 = E1 + the skinny kernels' one-round form with x read from L2
# (the payload's own build). bench latency --graphs, 50 steps, device ms, three rounds; ncu of the skinny
# kernels A vs E2; then every GPU kernel test (two processes) beside scripts/gpu_conformance.sh on E2.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
for a in A E1; do xz -dc .gpuwork/striker_$a.xz > $B/striker_$a && chmod +x $B/striker_$a; done
cp $B/striker $B/striker_E2
C=$B/config.json
for rep in 1 2 3; do
  for cb in "8192 8" "8192 1" "100000 1" "1024 2" "1024 4" "1024 16"; do set -- $cb
    echo -n "ctx$1 b$2:"
    for bin in striker_A striker_E1 striker_E2; do
      r=$(timeout 90 $B/$bin bench latency --config $C --quantization nvfp4 --graphs --context $1 --batch $2 --steps 50 --warmup 3 2>&1)
      echo -n " ${bin#striker_} $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')$(echo "$r" | grep -m1 -i error)"
    done; echo
  done
done
echo "table done at ${SECONDS}s"
timeout 60 $B/striker_E2 bench latency --config $C --quantization nvfp4 --graphs --context 8192 --batch 1 --steps 50 --warmup 3 > $OUT/bench_E2_1x8k.txt 2>&1
grep -iE 'kernels|roofline|peak' $OUT/bench_E2_1x8k.txt | head -5
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread
for bin in striker_A striker_E2; do
  timeout 40 "$NCU" --clock-control none --cache-control none -k "regex:nvfp4_skinny" --launch-skip 24 --launch-count 2 \
    --metrics $M $B/$bin bench latency --config $C --quantization nvfp4 --context 1024 --batch 4 --steps 1 \
    --warmup 0 > $OUT/ncu_skinny_$bin.txt 2>&1
  echo "ncu skinny b4 $bin rc=$?: $(grep -E '^\s+(gpu__time|smsp__inst|launch__reg)' $OUT/ncu_skinny_$bin.txt | awk '{print $1"="$NF}' | tr '\n' ' ')"
done
echo "ncu done at ${SECONDS}s"
LIMIT=${S40B_LIMIT:-450}
F1='CudaNvfp4.*:CudaMoe*:CudaBackend*:CudaLinear*:CudaGemv*'
( timeout $LIMIT $B/test_cuda_kernels --gtest_filter="$F1" > $OUT/kernel_tests_1.txt 2>&1; echo "kernel tests 1 rc=$? at ${SECONDS}s" ) &
( timeout $LIMIT $B/test_cuda_kernels --gtest_filter="-$F1" > $OUT/kernel_tests_2.txt 2>&1; echo "kernel tests 2 rc=$? at ${SECONDS}s" ) &
( timeout $LIMIT bash scripts/gpu_conformance.sh $B > $OUT/conformance.txt 2>&1; echo "conformance rc=$? at ${SECONDS}s" ) &
wait
for f in $OUT/kernel_tests_1.txt $OUT/kernel_tests_2.txt; do
  grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $f | head -20
  echo "OK lines: $(grep -c '^\[       OK' $f); last: $(grep '^\[ RUN' $f | tail -1)"
done
tail -14 $OUT/conformance.txt
echo "all done at ${SECONDS}s"
