#!/usr/bin/env bash
# Helper "glue" (issue 12: the small prefill kernels). Run from a directory holding ./striker,
# ./test_cuda_kernels, ./bench_cuda_kernels and config.json (the full Flint config). < 4 minutes.
set -uo pipefail
echo "== GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader 2>&1)"
echo "== tests: router, qk-norm/rope/kv, elementwise, rmsnorm, backend end-to-end"
timeout 90 ./test_cuda_kernels --gtest_brief=1 \
  --gtest_filter='CudaRouter*:CudaQkRopeKv*:CudaElementwise*:CudaRmsNorm*:CudaMoe.*:CudaMoeGrouped.SortAndCombine*:CudaBackend*' 2>&1 |
  grep -E "^\[  (FAILED|PASSED) |Failure|error|Expected|expected|max_ratio|differ|Which is|tests ran" | head -60
echo "tests rc=${PIPESTATUS[0]}"
echo "== bench rows: bench_cuda_kernels prefill-small"
timeout 40 ./bench_cuda_kernels prefill-small 2>&1 | tail -25
echo "bench rc=${PIPESTATUS[0]}"
for q in "" "--quantization nvfp4"; do
  echo "== striker bench prefill --tokens=8192 ${q:-(bf16)}"
  timeout 60 ./striker bench prefill --config config.json --tokens=8192 --repeats=3 $q 2>&1 | tail -8
  echo "bench prefill rc=${PIPESTATUS[0]}"
done
