#!/usr/bin/env bash
# dattn's H200 run: decode attention in one launch (the split kernel's last CTA merges <= 32 splits)
# and the QKV projection with q/k-norm + RoPE + KV write in its epilogue (thread-block clusters).
# Run from a directory holding ./striker, ./test_cuda_kernels, ./bench_cuda_kernels and config.json.
# ~3 minutes. STRIKER_AB_UNFUSED=1 (a temporary switch, deleted after this run) gives the
# two-launch forms of both in the same binary.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader || { echo "no GPU"; exit 3; }

echo "== GPU tests (attention, qk-rope, fused QKV front, GEMVs, backend steps vs the CPU reference, graphs)"
timeout 150 stdbuf -oL ./test_cuda_kernels --gtest_brief=1 \
  --gtest_filter='CudaAttention*:CudaQkRopeKv*:CudaQkvFront*:CudaGemv*:CudaNvfp4.Gemv*:CudaNvfp4.OneToEight*:CudaNvfp4.GateUp*:CudaBackend*' \
  >tests.log 2>&1
echo "test_cuda_kernels rc=$?"
grep -E "^\[  (FAILED|PASSED) |Failure|differs|fused|expected|Which is" tests.log | head -40

echo "== bench_cuda_kernels decode-attention (fused = one launch; '2 launches' = split + combine)"
timeout 100 stdbuf -oL ./bench_cuda_kernels decode-attention >bench.log 2>&1
echo "bench_cuda_kernels rc=$?"
grep -E "^\| (kernel|attn|qkv\+front|nvfp4 qkv\+front)|checks failed" bench.log

echo "== striker bench latency --graphs (50 steps): fused (default) and STRIKER_AB_UNFUSED=1"
run() {  # label, env setting, then striker bench latency arguments
  local label=$1 ab=$2; shift 2
  local out ms kern
  out=$(env $ab timeout 60 ./striker bench latency --config config.json --graphs --steps 50 "$@" 2>&1)
  ms=$(echo "$out" | grep -oE "ms/step: median [0-9.]+ wall \([0-9.]+ device\)" | grep -oE "\([0-9.]+" | tr -d '(')
  kern=$(echo "$out" | grep -oE "kernels per step: [0-9]+" | grep -oE "[0-9]+$")
  local form=fused
  [ "$ab" = STRIKER_AB_UNFUSED=1 ] && form=unfused
  printf "| %-16s | %-8s | %8s ms | %5s kernels |\n" "$label" "$form" "${ms:-FAIL}" "${kern:-?}"
  [ -n "$ms" ] || echo "$out" | tail -5
}
for ab in "" "STRIKER_AB_UNFUSED=1"; do
  run "BF16 b1 8K" "${ab:-X=fused}" --context 8192 --batch 1
  run "NVFP4 b1 8K" "${ab:-X=fused}" --context 8192 --batch 1 --quantization nvfp4
  run "BF16 b8 8K" "${ab:-X=fused}" --context 8192 --batch 8
done
run "NVFP4 b8 8K" "X=fused" --context 8192 --batch 8 --quantization nvfp4
run "BF16 b1 100K" "X=fused" --context 100000 --batch 1
