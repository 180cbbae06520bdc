#!/usr/bin/env bash
# dattn's H200 run (decode attention in one launch: the split kernel's last CTA merges the splits).
# Run from a directory holding ./striker, ./test_cuda_kernels, ./bench_cuda_kernels and config.json.
# ~2-3 minutes. Prints the tests' verdicts, the attention bench rows and a latency table.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader || { echo "no GPU"; exit 3; }

echo "== GPU tests (attention decode/prefill, qk-rope, backend steps vs the CPU reference, graphs vs eager)"
timeout 150 ./test_cuda_kernels --gtest_brief=1 \
  --gtest_filter='CudaAttention*:CudaQkRopeKv*:CudaPrefillAttention*:CudaBackend*' >tests.log 2>&1
echo "test_cuda_kernels rc=$?"
grep -E "^\[  (FAILED|PASSED) |Failure|differs|expected|Which is" tests.log | head -40

echo "== bench_cuda_kernels decode: attention rows (fused = one launch; '2 launches' = split + combine kernels)"
timeout 120 ./bench_cuda_kernels decode >bench.log 2>&1
echo "bench_cuda_kernels rc=$?"
grep -E "^\| (kernel|attn)|checks failed" bench.log

echo "== striker bench latency --graphs (50 steps)"
run() {  # label, then striker bench latency arguments
  local label=$1; shift
  local out
  out=$(timeout 60 ./striker bench latency --config config.json --graphs --steps 50 "$@" 2>&1)
  local ms kern
  ms=$(echo "$out" | grep -oE "ms/step: median [0-9.]+ wall \([0-9.]+ device\)" | grep -oE "\([0-9.]+" | tr -d '(')
  kern=$(echo "$out" | grep -oE "kernels per step: [0-9]+" | grep -oE "[0-9]+$")
  printf "| %-28s | %8s ms | %5s kernels |\n" "$label" "${ms:-FAIL}" "${kern:-?}"
  [ -n "$ms" ] || echo "$out" | tail -5
}
run "BF16 b1 8K" --context 8192 --batch 1
run "BF16 b8 8K" --context 8192 --batch 8
run "NVFP4 b1 8K" --context 8192 --batch 1 --quantization nvfp4
run "NVFP4 b8 8K" --context 8192 --batch 8 --quantization nvfp4
run "BF16 b1 100K" --context 100000 --batch 1
