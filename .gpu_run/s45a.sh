#!/usr/bin/env bash
# Session 45 run 1: main with cuBLASLt opened at run time (session 44, first GPU run) and the one-launch
# MoE of one NVFP4 token behind STRIKER_AB_MOE_ONE_LAUNCH=1 (nvfp4_moe_one_launch.cu). Every GPU kernel
# test (two processes; CudaNvfp4MoeOneLaunch.* compares the one launch with the two bit for bit) beside
# scripts/gpu_conformance.sh; then the full-size dummy NVFP4 model's teacher-forced log-probabilities
# decoded one token a step with the switch off, on (1) and 2 (the same kernel as a cooperative launch: does the
# driver take it beside PDL in a graph?) — byte-identical JSON expected; then the A/B (bench latency --graphs, 50
# steps, device ms / kernels per step, three rounds, off / on; one round of 2) and BF16's rows.
# Knobs: S45_LIMIT (s per test process, 360), S45_ROUNDS (3), S45_REST=0 (no second test process), S45_CONF=0 (no conformance).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
LIMIT=${S45_LIMIT:-360}
F1='CudaNvfp4.*:CudaNvfp4MoeOneLaunch.*:CudaMoe*:CudaBackend*:CudaLinear*:CudaGemv*:CudaGemm*'
( timeout $LIMIT $B/test_cuda_kernels --gtest_filter="$F1" > $OUT/kernel_tests_1.txt 2>&1; echo "kernel tests 1 rc=$? at ${SECONDS}s" ) &
[ "${S45_REST:-1}" = 1 ] && ( timeout $LIMIT $B/test_cuda_kernels --gtest_filter="-$F1" > $OUT/kernel_tests_2.txt 2>&1; echo "kernel tests 2 rc=$? at ${SECONDS}s" ) &
[ "${S45_CONF:-1}" = 1 ] && ( timeout $LIMIT bash scripts/gpu_conformance.sh $B > $OUT/conformance.txt 2>&1; echo "conformance rc=$? at ${SECONDS}s" ) &
wait
for f in $OUT/kernel_tests_*.txt; do
  grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $f | head -20
  echo "OK lines: $(grep -c '^\[       OK' $f); last: $(grep '^\[ RUN' $f | tail -1)"
done
grep -A3 "OneLaunch" $OUT/kernel_tests_1.txt | grep -E "OK|FAILED|Failure|differ" | head
grep -i -m3 'cublas' $OUT/kernel_tests_*.txt $OUT/conformance.txt
[ -f $OUT/conformance.txt ] && tail -14 $OUT/conformance.txt
ids=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(40)))")
for ab in 0 1 2; do
  STRIKER_AB_MOE_ONE_LAUNCH=$ab timeout 120 $B/striker perplexity $B --load-format dummy --quantization nvfp4 \
    --device cuda --decode-batch 1 --decode-prefill 8 --ids "$ids" --json > $OUT/ppl_$ab.json 2> $OUT/ppl_$ab.err
  echo "perplexity one token a step, switch $ab: rc=$? $(head -c 300 $OUT/ppl_$ab.json | grep -oE '"perplexity":[^,}]*')"
done
for ab in 1 2; do
  cmp -s $OUT/ppl_0.json $OUT/ppl_$ab.json && echo "one-launch MoE ($ab) end to end: JSON byte-identical" || echo "one-launch MoE ($ab) end to end: JSON DIFFERS"
done
C=$B/config.json
run() {  # ctx batch [quantization args]
  local ctx=$1 b=$2; shift 2
  r=$(timeout 90 $B/striker bench latency --config $C "$@" --graphs --context $ctx --batch $b --steps 50 --warmup 3 2>&1)
  echo -n " $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
  [ "$rep" = 1 ] && echo "$r" > "$OUT/bench_${ctx}_${b}_${1:-bf16}${2:-}_${STRIKER_AB_MOE_ONE_LAUNCH:-0}.txt"
}
for rep in $(seq ${S45_ROUNDS:-3}); do
  for cb in "8192 1" "100000 1"; do set -- $cb
    echo -n "nvfp4 ctx$1 b$2 off/on:"; STRIKER_AB_MOE_ONE_LAUNCH=0 run $1 $2 --quantization nvfp4
    STRIKER_AB_MOE_ONE_LAUNCH=1 run $1 $2 --quantization nvfp4; echo
  done
done
for cb in "8192 1" "100000 1"; do set -- $cb; rep=1  # the cooperative launch (switch 2): taken beside PDL in a graph?
  echo -n "nvfp4 ctx$1 b$2 cooperative:"; STRIKER_AB_MOE_ONE_LAUNCH=2 run $1 $2 --quantization nvfp4; echo
done
for cb in "8192 8" ; do set -- $cb; rep=1
  echo -n "nvfp4 ctx$1 b$2:"; run $1 $2 --quantization nvfp4; echo
done
for cb in "8192 1" "100000 1" "8192 8"; do set -- $cb; rep=1
  echo -n "bf16 ctx$1 b$2:"; run $1 $2; echo
done
echo "all done at ${SECONDS}s"
