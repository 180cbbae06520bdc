#!/usr/bin/env bash
# Session 16, one device call: the landed form (tensor-core NVFP4 decode, no knobs) — latency table and
# the two remaining A/B arms first (STRIKER_AB_R72=1: one-token NVFP4 GEMVs capped at 72 registers;
# STRIKER_AB_BFMMA=1: BF16 one-token GEMVs and MoE gate/up on the diagonal MMA), one NVFP4 timeline,
# then every GPU test alongside scripts/gpu_conformance.sh, and the knob arms' own tests.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
ms() { timeout 90 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for a in "--context=8192" "--context=100000" "--context=8192 --batch 8"; do
  for q in "" "--quantization nvfp4"; do
    echo "${q:-bf16} $a: $(timeout 90 $B/striker bench latency --config $C --graphs --steps 50 $a $q 2>&1 | grep -E 'ms/step|kernels per|roofline' | tr '\n' ' ' | cut -c1-300)"
  done
done
for a in "--context=8192" "--context=8192" "--context=100000"; do
  A="$a --quantization nvfp4"; echo "nvfp4 $a gemv 80 regs: $(ms X=1)  capped at 72: $(ms STRIKER_AB_R72=1)"
  A="$a"; echo "bf16 $a main: $(ms X=1)  diagonal MMA: $(ms STRIKER_AB_BFMMA=1)"
done
A="--context=8192 --batch 8"; echo "bf16 b8 diagonal MMA: $(ms STRIKER_AB_BFMMA=1)"
CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 --quantization nvfp4 --steps 15 --warmup 3 > /dev/null 2>&1
python3 scripts/step_timeline.py /tmp/tl.csv "NVFP4 8K" | head -24
( timeout 330 bash scripts/gpu_conformance.sh $B > /tmp/conf.log 2>&1; echo "conformance rc=$?" > /tmp/conf.rc ) &
timeout 300 $B/test_cuda_kernels --gtest_brief=1 > /tmp/t.log 2>&1; echo "test_cuda_kernels rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t.log | head -3 | tr '\n' ' ')"; grep -B2 -A12 Failure /tmp/t.log | head -30; grep -E '^\[  FAILED' /tmp/t.log | head
STRIKER_AB_R72=1 timeout 60 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaNvfp4.*:CudaBackend.Nvfp4Forward*:CudaGemvInputNorm.Nvfp4*' > /tmp/t72.log 2>&1; echo "nvfp4 tests, 72 registers: rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t72.log | head -2 | tr '\n' ' ')"
STRIKER_AB_BFMMA=1 timeout 90 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaGemv*:CudaMoe*:CudaBackend.Forward*:CudaGemvInputNorm.*' > /tmp/tbf.log 2>&1; echo "bf16 tests, diagonal MMA: rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/tbf.log | head -2 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/tbf.log | head -20
wait; cat /tmp/conf.rc 2>/dev/null; cat ${OUT:-/tmp/striker-conformance}/conformance_table.md 2>/dev/null || tail -20 /tmp/conf.log
