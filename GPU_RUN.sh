#!/usr/bin/env bash
# GPU run of branch `moebf16` (issue 12: BF16 wgmma grouped expert GEMMs). Run from a directory
# holding ./striker, ./test_cuda_kernels, ./bench_cuda_kernels and config.json (full Flint config).
# Under 4 minutes. The tests run both routing tile heights (128: one CTA per tile, the old kernel;
# 256: 2-CTA pairs multicasting the weight tiles); the bench times both side by side ("moe wgmma"
# vs "moe wgmma pair" rows); the prefill runs the new default (pairs from 160 rows per expert).
set -u
echo "== tests (CudaMoeGroupedWgmma, CudaWgmmaProbe, CudaMoeGrouped)"
timeout 80 ./test_cuda_kernels --gtest_filter='CudaMoeGroupedWgmma.*:CudaWgmmaProbe.*:CudaMoeGrouped.*' 2>&1 \
  | grep -E '^\[ +(OK|FAILED|PASSED) +\]|^\[==========\]|Failure|tile [0-9]+,|Expected|Which is|error|what\(\)' | head -80
echo "tests rc=${PIPESTATUS[0]}"
echo "== bench_cuda_kernels grouped-moe (wgmma rows)"
timeout 90 ./bench_cuda_kernels grouped-moe 2>&1 | grep -E 'wgmma|grouped|error|what\(\)|FAIL|mismatch' | head -60
echo "bench rc=${PIPESTATUS[0]}"
echo "== striker bench prefill 8192 (BF16)"
timeout 70 ./striker bench prefill --config config.json --tokens=8192 --repeats=3 2>&1 | tail -12
echo "prefill rc=${PIPESTATUS[0]}"
