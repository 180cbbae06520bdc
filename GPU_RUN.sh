#!/usr/bin/env bash
# GPU run of branch `moebf16` (issue 12: BF16 wgmma grouped expert GEMMs). Run from a directory
# holding ./striker, ./test_cuda_kernels, ./bench_cuda_kernels and config.json (full Flint config).
# Under 4 minutes. The tests run both routing tile heights (128: 128 rows × 256 weight rows per
# CTA, the measured kernel; 256: "tall", 256 rows × 128 weight rows); the bench times both side by
# side ("moe wgmma" vs "moe wgmma tall" rows, T = 2048 and 8192: those rows decide); the prefill
# runs the default (tall tiles from 160 rows per expert, i.e. at 8192 tokens).
set -u
echo "== tests (CudaMoeGroupedWgmma, CudaWgmmaProbe, CudaMoeGrouped)"
timeout 80 ./test_cuda_kernels --gtest_filter='CudaMoeGroupedWgmma.*:CudaWgmmaProbe.*:CudaMoeGrouped.*' 2>&1 \
  | grep -E '^\[ +(FAILED|PASSED) +\]|^\[==========\]|Failure|tile [0-9]+,|Expected|Which is|error|what\(\)' | head -60
echo "tests rc=${PIPESTATUS[0]}"
echo "== bench_cuda_kernels grouped-moe (BF16 wgmma rows)"
timeout 90 ./bench_cuda_kernels grouped-moe 2>&1 | grep -E '^\| moe wgmma|error|what\(\)|FAIL' | head -40
echo "bench rc=${PIPESTATUS[0]}"
echo "== striker bench prefill 8192 (BF16)"
timeout 70 ./striker bench prefill --config config.json --tokens=8192 --repeats=3 2>&1 | tail -12
echo "prefill rc=${PIPESTATUS[0]}"
