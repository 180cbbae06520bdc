#!/usr/bin/env bash
# GPU run of branch `nvmoe` (issue 12: NVFP4 prefill MoE without the bf16 scratch; kernels in
# src/backends/cuda/moe/moe_grouped_wgmma_nvfp4.cu). Run from a directory holding ./striker,
# ./test_cuda_kernels, ./bench_cuda_kernels and config.json (full Flint config). Under 4 minutes.
# The bench prints the scratch route ("nvfp4 wgmma T=...") and the new one ("nvfp4 direct T=...")
# side by side at T = 2048 and 8192; the prefill runs the new dispatch.
set -u
echo "== tests (CudaMoeGroupedNvfp4Direct, NVFP4 scratch route, wgmma probe, backend NVFP4)"
timeout 80 ./test_cuda_kernels --gtest_filter='CudaMoeGroupedNvfp4Direct.*:CudaMoeGroupedWgmma.Nvfp4*:CudaWgmmaProbe.*:CudaBackend.Nvfp4*' 2>&1 \
  | grep -E '^\[ +(OK|FAILED|PASSED) +\]|^\[==========\]|Failure|Expected|Which is|max|error|what\(\)' | head -60
echo "tests rc=${PIPESTATUS[0]}"
if command -v compute-sanitizer >/dev/null; then
  echo "== memcheck, row counts around the tile"
  timeout 40 compute-sanitizer --tool memcheck --print-limit 5 ./test_cuda_kernels \
    --gtest_filter='CudaMoeGroupedNvfp4Direct.RowCountsAroundTheTileMatchReference' 2>&1 | tail -4
fi
echo "== bench_cuda_kernels grouped-moe (nvfp4 rows; BF16 wgmma rows for scale)"
timeout 90 ./bench_cuda_kernels grouped-moe 2>&1 | grep -E 'nvfp4|moe wgmma|error|what\(\)|FAIL|mismatch' | head -60
echo "bench rc=${PIPESTATUS[0]}"
echo "== striker bench prefill 8192 NVFP4"
timeout 70 ./striker bench prefill --config config.json --tokens=8192 --repeats=3 --quantization nvfp4 2>&1 | tail -12
echo "prefill rc=${PIPESTATUS[0]}"
