#!/usr/bin/env bash
# Session 27 run 1 (kernel payload: STRIKER_SHIP_SERVER=0 bash scripts/ship_gpu.sh): session 26's async
# scheduling on the GPU for the first time — the new GPU tests and every test of the code the
# launch/collect split touched; bench throughput with and without --async-scheduling; then, with the time
# left, the batched decode curve of .gpu_run/s26a.sh (curves only).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
timeout 200 $B/test_cuda_kernels --gtest_filter='CudaEmbedding.*:CudaSampling.*:CudaLogprob*:CudaBackend.*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[==========\]|Failure|FAILED" | head -30
echo "kernel tests done at ${SECONDS}s"
for q in "" "--quantization nvfp4"; do
  for a in "" "--async-scheduling" "" "--async-scheduling"; do
    echo "throughput ${q:-bf16} ${a:-sync}: $(timeout 100 $B/striker bench throughput --config $C --tokenizer $B/flint-tokenizer --device cuda \
      --num-prompts 64 --input-len 1024 --output-len 128 $q $a 2>&1 | grep -E 'elapsed|decode steps|Async|rror' | tr '\n' ' ')"
  done
done
echo "throughput done at ${SECONDS}s"
for q in bf16 nvfp4; do
  qarg=""; [ $q = nvfp4 ] && qarg="--quantization nvfp4"
  for b in 1 8 16 64 256; do
    [ $SECONDS -gt 330 ] && break
    ctx=1024; [ $b -le 8 ] && ctx=8192
    r=$(timeout 60 $B/striker bench latency --config $C $qarg --graphs --context $ctx --batch $b --steps 30 --warmup 3 2>&1)
    echo "$q b$b ctx$ctx: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') | $(echo "$r" | grep -oE '[0-9.]+% of the 4.6') | $(echo "$r" | grep -oE 'kernels per step: [0-9]+')"
  done
done
echo "all done at ${SECONDS}s"
