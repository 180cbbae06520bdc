#!/usr/bin/env bash
# Session 48's four prepared experiments, each bit-identical by construction (docs/performance.md, "Forty-eighth
# session"), stacked in this order (`git cherry-pick c177c5b 53dfc6c 1e6e3b0 535c115` on main):
#   x1    c177c5b  the one-token block norm in two barriers + the router's norm of one token by the whole CTA
#   x12   53dfc6c  + the decode attention's warp accumulators in a bank-conflict-free layout for the merge
#   x123  1e6e3b0  + the NVFP4 norm-inside GEMVs' x row in the dot products' piece order (NVFP4 only)
#   x1234 535c115  + one-token NVFP4 GEMVs of exactly one chunk / one pair per lane at 4 CTAs per SM (NVFP4 only)
# gpubin/ is x1234's build (its kernel tests test all four); $BINS holds base.xz (main: 4c5c99d's kernels),
# x1.xz, x12.xz, x123.xz and the stamps builds s0.xz (main) and s1234.xz, each `strip --strip-all` + xz of the
# build's striker.
# 1) x1234's kernel tests (two processes: attention; norm, router, GEMV, NVFP4, backend, one-token MoE);
# 2) the full-size dummy model's log-probabilities decoded one token a step: every variant byte-identical to base
#    (NVFP4: all five; BF16: base, x1, x12 — x123 and x1234 change NVFP4 kernels only);
# 3) bench latency --graphs A/B, S48_ROUNDS rounds (2), and batch 8 once; 4) the stamps of main and x1234
#    (NVFP4 8K and 100K, BF16 8K).
# Knobs: S48_LIMIT (s per test process, 300), S48_ROUNDS, S48_STAMPS=0 (skip part 4; skipped by itself past
# S48_STAMPS_BEFORE = 480 s), S48_TESTS=0 (skip 1-2).
cd "$(dirname "$0")/.."
source .gpu_run/env.sh
BINS=${BINS:-.gpuwork/bins}
for b in base x1 x12 x123 s0 s1234; do xz -dc "$BINS/$b.xz" > /tmp/$b && chmod +x /tmp/$b || echo "missing $BINS/$b.xz"; done
cp $B/striker /tmp/x1234
NV="base x1 x12 x123 x1234" BF="base x1 x12"
if [ "${S48_TESTS:-1}" = 1 ]; then
  LIMIT=${S48_LIMIT:-300}
  F1='CudaAttention*:CudaQkRopeKv*'
  F2='CudaRmsNorm*:CudaGemvInputNorm*:CudaRouter*:CudaGemv.*:CudaNvfp4.*:CudaBackend*:CudaMoe.*'
  ( timeout $LIMIT $B/test_cuda_kernels --gtest_filter="$F1" > $OUT/kernel_tests_1.txt 2>&1; echo "kernel tests 1 rc=$? at ${SECONDS}s" ) &
  ( timeout $LIMIT $B/test_cuda_kernels --gtest_filter="$F2" > $OUT/kernel_tests_2.txt 2>&1; echo "kernel tests 2 rc=$? at ${SECONDS}s" ) &
  wait
  for f in $OUT/kernel_tests_*.txt; do
    grep -E '^\[  (PASSED|FAILED) |^\[  FAILED' $f | head -20
    echo "$f: OK $(grep -c '^\[       OK' $f), FAILED $(grep -c '^\[  FAILED  \] Cuda' $f); last: $(grep '^\[ RUN' $f | tail -1)"
  done
  ids=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(40)))")
  for q in nvfp4 bf16; do
    qa=() vs=$BF; [ $q = nvfp4 ] && qa=(--quantization nvfp4) vs=$NV
    for v in $vs; do
      timeout 120 /tmp/$v perplexity $B --load-format dummy "${qa[@]}" --device cuda --decode-batch 1 --decode-prefill 8 \
        --ids "$ids" --json > $OUT/ppl_${q}_$v.json 2> $OUT/ppl_${q}_$v.err
      echo "perplexity $q $v: rc=$? $(head -c 300 $OUT/ppl_${q}_$v.json | grep -oE '"perplexity":[^,}]*')"
      [ $v = base ] || { cmp -s $OUT/ppl_${q}_base.json $OUT/ppl_${q}_$v.json && echo "  $q $v: JSON byte-identical to base" || echo "  $q $v: JSON DIFFERS from base"; }
    done
  done
fi
ms() { echo "$1" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+'; }
bench() {  # binary quantization context batch
  local qa=(); [ $2 = nvfp4 ] && qa=(--quantization nvfp4)
  timeout 90 $1 bench latency --config $C "${qa[@]}" --graphs --context $3 --batch $4 --steps 50 --warmup 3 2>&1
}
for rep in $(seq ${S48_ROUNDS:-2}); do
  for case in "nvfp4 8192" "nvfp4 100000" "bf16 8192" "bf16 100000"; do set -- $case
    vs=$BF; [ $1 = nvfp4 ] && vs=$NV
    line="$1 $2 b1 ${vs// / / }:"
    for v in $vs; do line="$line $(ms "$(bench /tmp/$v $1 $2 1)")"; done
    echo "$line"
  done
done
for q in nvfp4 bf16; do
  line="$q 8192 b8 base / x1234:"
  for v in base x1234; do r=$(bench /tmp/$v $q 8192 8); line="$line $(ms "$r")/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')"; done
  echo "$line"
done
echo "bench done at ${SECONDS}s"
# The stamps need ~90 s: skipped (say so) when the call's 600 s limit is near — run again with S48_TESTS=0 S48_ROUNDS=0.
if [ "${S48_STAMPS:-1}" = 1 ] && [ $SECONDS -gt ${S48_STAMPS_BEFORE:-480} ]; then
  echo "stamps skipped: ${SECONDS}s used; rerun with S48_TESTS=0 S48_ROUNDS=0"
elif [ "${S48_STAMPS:-1}" = 1 ]; then
  for case in "nvfp4 8192" "bf16 8192" "nvfp4 100000"; do set -- $case
    q=$1 ctx=$2 qa=(); [ $q = nvfp4 ] && qa=(--quantization nvfp4)
    for v in s0 s1234; do
      f=/tmp/st_${v}_${q}_$ctx.bin
      r=$(STRIKER_STAMPS=$f timeout 120 /tmp/$v bench latency --config $C "${qa[@]}" --graphs --context $ctx --batch 1 --steps 30 --warmup 3 2>&1)
      echo "== $v $q $ctx stamped $(ms "$r") ms $(echo "$r" | grep -m1 -i error)"
      python3 scripts/stamps_report.py $f > $OUT/rep_${v}_${q}_$ctx.txt 2>&1
      head -40 $OUT/rep_${v}_${q}_$ctx.txt
      rm -f $f
    done
  done
fi
ls -la $OUT
echo "all done at ${SECONDS}s"
