#!/usr/bin/env bash
# GPU run of branch `nvmoe` (issue 12: NVFP4 prefill MoE without the bf16 scratch; kernels in
# src/backends/cuda/moe/moe_grouped_wgmma_nvfp4.cu). Run from a directory holding ./striker,
# ./test_cuda_kernels, ./bench_cuda_kernels and config.json (full Flint config). Under 4 minutes.
# Bench rows that decide: "nvfp4 wgmma T=N all" (register-decode kernels) against
# "nvfp4 moe grouped T=N all 4 kernels" (64-row mma.sync) at N = 1024, 2048 (where NVFP4 steps
# switch paths: today from 80 rows per expert), and "nvfp4 wgmma T=8192 gate/up, down" against the
# BF16 "moe wgmma T=8192" rows (target <= 1.1x).
set -u
echo "== tests (CudaMoeGroupedNvfp4Direct, wgmma probe, backend NVFP4 incl. a 300-token prefill on this path)"
timeout 80 ./test_cuda_kernels --gtest_filter='CudaMoeGroupedNvfp4Direct.*:CudaWgmmaProbe.*:CudaBackend.Nvfp4*' 2>&1 \
  | grep -E '^\[ +(OK|FAILED|PASSED) +\]|^\[==========\]|Failure|Expected|Which is|bad in|backend vs reference|error|what\(\)' | head -60
echo "tests rc=${PIPESTATUS[0]}"
if command -v compute-sanitizer >/dev/null; then
  echo "== memcheck, row counts around the tile (both routing tile heights)"
  timeout 40 compute-sanitizer --tool memcheck --print-limit 5 ./test_cuda_kernels \
    --gtest_filter='CudaMoeGroupedNvfp4Direct.RowCountsAroundTheTileMatchReference' 2>&1 | tail -4
fi
echo "== bench_cuda_kernels grouped-moe (nvfp4 rows; BF16 wgmma rows for scale)"
timeout 90 ./bench_cuda_kernels grouped-moe 2>&1 | grep -E 'nvfp4|moe wgmma|error|what\(\)|FAIL|mismatch' | head -60
echo "bench rc=${PIPESTATUS[0]}"
echo "== striker bench prefill 8192 NVFP4"
timeout 70 ./striker bench prefill --config config.json --tokens=8192 --repeats=3 --quantization nvfp4 2>&1 | tail -12
echo "prefill rc=${PIPESTATUS[0]}"
