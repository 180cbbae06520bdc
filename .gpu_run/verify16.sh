#!/usr/bin/env bash
# Session 16: the landed form (tensor-core NVFP4 decode everywhere a decode step runs NVFP4, no knobs):
# every GPU test, the latency table, one NVFP4 step timeline; `conformance` as $1 runs gpu_conformance.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
if [ "${1:-}" = conformance ]; then
  timeout 560 bash scripts/gpu_conformance.sh $B > /tmp/conf.log 2>&1; echo "conformance rc=$?"; cat ${OUT:-/tmp/striker-conformance}/conformance_table.md 2>/dev/null || tail -30 /tmp/conf.log
  exit 0
fi
timeout 300 $B/test_cuda_kernels --gtest_brief=1 > /tmp/t.log 2>&1; echo "test_cuda_kernels rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t.log | head -3 | tr '\n' ' ')"; grep -B2 -A12 Failure /tmp/t.log | head -40; grep -E '^\[  FAILED' /tmp/t.log | head
STRIKER_AB_R72=1 timeout 100 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaNvfp4.*:CudaBackend.Nvfp4*:CudaGemvInputNorm.Nvfp4*' > /tmp/t72.log 2>&1; echo "nvfp4 tests, gemv capped at 72 registers: rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t72.log | head -2 | tr '\n' ' ')"
STRIKER_AB_BFMMA=1 timeout 150 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaGemv*:CudaMoe*:CudaBackend.Forward*:CudaBackend.Batched*:CudaGemvInputNorm.*' > /tmp/tbf.log 2>&1; echo "bf16 tests, diagonal MMA: rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/tbf.log | head -2 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/tbf.log | head -30
run() { echo "$1: $(timeout 90 $B/striker bench latency --config $C --graphs --steps 50 $2 2>&1 | grep -E 'ms/step|kernels per|roofline' | tr '\n' ' ' | cut -c1-400)"; }
for a in "--context=8192" "--context=100000" "--context=8192 --batch 8"; do
  run "bf16 $a" "$a"; run "nvfp4 $a" "$a --quantization nvfp4"
done
for r in 1 2; do for a in "--context=8192" "--context=100000"; do
  echo "nvfp4 $a gemv regs 80: $(timeout 90 $B/striker bench latency --config $C --graphs --steps 50 $a --quantization nvfp4 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/')  capped at 72: $(STRIKER_AB_R72=1 timeout 90 $B/striker bench latency --config $C --graphs --steps 50 $a --quantization nvfp4 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/')"
done; done
for r in 1 2; do for a in "--context=8192" "--context=100000"; do
  echo "bf16 $a main: $(timeout 90 $B/striker bench latency --config $C --graphs --steps 50 $a 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/')  diagonal MMA: $(STRIKER_AB_BFMMA=1 timeout 90 $B/striker bench latency --config $C --graphs --steps 50 $a 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/')"
done; done
echo "bf16 b8 diagonal MMA (gate/up per slot): $(STRIKER_AB_BFMMA=1 timeout 90 $B/striker bench latency --config $C --graphs --steps 50 --context=8192 --batch 8 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/')"
CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 --quantization nvfp4 --steps 15 --warmup 3 > /dev/null 2>&1
python3 scripts/step_timeline.py /tmp/tl.csv "NVFP4 8K" | head -40
