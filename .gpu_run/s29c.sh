#!/usr/bin/env bash
# Session 29 (not run: no device started): the smallest form of s29a.sh (same payload, ~2 minutes): the grouped NVFP4 tests of the
# full branch, batched-moe main vs fetch-ahead vs all of s29.patch, the 64-sequence NVFP4 step of each.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 40 $B/test_cuda_kernels --gtest_filter='CudaMoeGroupedNvfp4*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |^\[==========\]|Failure|FAILED" | head -8
for v in base ar fa dec; do
  [ $SECONDS -gt 90 ] && break
  bin=$B/bench_cuda_kernels; [ $v != ar ] && bin=$B/bench_$v
  timeout 25 $bin batched-moe 2>&1 | grep -E "nvfp4 moe grouped T=(8|64) (gate|down|all)|failed" | sed "s/^/$v /"
done
for v in base ar fa; do
  [ $SECONDS -gt 110 ] && break
  bin=$B/striker; [ $v != ar ] && bin=$B/striker_$v
  r=$(timeout 25 $bin bench latency --config $C --quantization nvfp4 --graphs --context 1024 --batch 64 --steps 20 --warmup 2 2>&1)
  echo "$v nvfp4 b64: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') $(echo "$r" | grep -m1 -i error)"
done
echo "all done at ${SECONDS}s"
