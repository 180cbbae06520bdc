#!/usr/bin/env bash
# dmoe's H200 check of its final state (router one cluster per token, skinny o_proj with all of its
# weights before the wait). The A/B run of the session (results in docs/performance.md, "The MoE
# half of a decode layer") ran an earlier version of this script with the deleted variants.
# Run from a directory holding ./striker, ./test_cuda_kernels, ./bench_cuda_kernels and config.json.
# About 3 minutes. Prints the tests' verdicts, the MoE/router/norm bench rows and a latency table.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader || { echo "no GPU"; exit 3; }

echo "== GPU tests (router incl. the input norm bit for bit at T = 1, 3, 8; GEMV/skinny incl. the 16-deep o_proj ring)"
timeout 150 ./test_cuda_kernels --gtest_brief=1 \
  --gtest_filter='CudaRouter*:CudaGemv*' >tests.log 2>&1
echo "test_cuda_kernels rc=$?"
grep -E "^\[  (FAILED|PASSED) |Failure|differs|expected|Which is| vs " tests.log | head -40

echo "== bench_cuda_kernels decode: router, per-slot MoE, o_proj rows"
timeout 150 ./bench_cuda_kernels decode >bench.log 2>&1
echo "bench_cuda_kernels rc=$?"
grep -E "^\| (kernel|router|moe per-slot|nvfp4 moe per-slot|moe T=|o_proj|nvfp4 o_proj|rmsnorm)|checks failed" bench.log

echo "== striker bench latency --graphs (50 steps)"
run() {  # label, then striker bench latency arguments
  local label=$1; shift
  local out
  out=$(timeout 45 ./striker bench latency --config config.json --graphs --steps 50 "$@" 2>&1)
  local ms kern frac
  ms=$(echo "$out" | grep -oE "ms/step: median [0-9.]+ wall \([0-9.]+ device\)" | grep -oE "\([0-9.]+" | tr -d '(')
  kern=$(echo "$out" | grep -oE "kernels per step: [0-9]+" | grep -oE "[0-9]+$")
  frac=$(echo "$out" | grep -oE "= [0-9.]+% of the 4.6" | grep -oE "[0-9.]+%")
  printf "| %-14s | %8s ms | %6s | %5s kernels |\n" "$label" "${ms:-FAIL}" "${frac:-?}" "${kern:-?}"
  [ -n "$ms" ] || echo "$out" | tail -5
}
run "BF16 b1 8K" --context 8192 --batch 1
run "BF16 b8 8K" --context 8192 --batch 8
run "NVFP4 b1 8K" --context 8192 --batch 1 --quantization nvfp4
run "NVFP4 b8 8K" --context 8192 --batch 8 --quantization nvfp4
