#!/usr/bin/env bash
# Session 46 run 4: the decode attention's warp merge with its loads first (merge_warps_into_record<.., true>
# in the pipelined split kernels) and the cluster kernel's last barrier relaxed — both bit-preserving.
# The attention and backend kernel tests; the full-size dummy model's log-probabilities (NVFP4 and BF16,
# one token a step) from the base binary (.gpuwork/base/striker.xz: main before the change) and the new one,
# byte-identical expected; then bench latency --graphs A/B (base / new), S46_ROUNDS rounds (2).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc .gpuwork/base/striker.xz > $B/striker_base && chmod +x $B/striker_base
timeout ${S46_LIMIT:-150} $B/test_cuda_kernels --gtest_filter='CudaAttention*:CudaBackend*:CudaQkRopeKv*' > $OUT/tests.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/tests.txt | tr '\n' ' ') OK lines $(grep -c '^\[       OK' $OUT/tests.txt)"
grep '^\[  FAILED' $OUT/tests.txt | head
ids=$(python3 -c "import random; random.seed(7); print(','.join(str(random.randrange(1000, 150000)) for _ in range(40)))")
for q in nvfp4 bf16; do
  qa=""; [ $q = nvfp4 ] && qa="--quantization nvfp4"
  for bin in striker_base striker; do
    timeout 120 $B/$bin perplexity $B --load-format dummy $qa --device cuda --decode-batch 1 --decode-prefill 8 \
      --ids "$ids" --json > $OUT/ppl_${q}_$bin.json 2> $OUT/ppl_${q}_$bin.err || echo "perplexity $q $bin failed: $(tail -2 $OUT/ppl_${q}_$bin.err)"
  done
  cmp -s $OUT/ppl_${q}_striker_base.json $OUT/ppl_${q}_striker.json && echo "$q one token a step: JSON byte-identical" || echo "$q one token a step: JSON DIFFERS"
done
C=$B/config.json
run() {  # bin ctx batch [quantization args]
  local bin=$1 ctx=$2 b=$3; shift 3
  r=$(timeout 90 $B/$bin bench latency --config $C "$@" --graphs --context $ctx --batch $b --steps 50 --warmup 3 2>&1)
  echo -n " $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
}
for rep in $(seq ${S46_ROUNDS:-2}); do
  for cq in "8192 --quantization nvfp4" "100000 --quantization nvfp4" "8192"; do set -- $cq
    echo -n "ctx$1 ${2:-bf16} base/new:"; run striker_base $1 1 ${2:-} ${3:-}; run striker $1 1 ${2:-} ${3:-}; echo
  done
done
echo "all done at ${SECONDS}s"
