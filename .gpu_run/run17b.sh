#!/usr/bin/env bash
# Session 17, run 2 (one binary on main fd47b52 + knobs): STRIKER_AB_SEL=1 = the NVFP4 decode router writes logits only and the
# MoE gate/up kernel selects the top K (every routed CTA, warp 0); STRIKER_AB_CMB=1 = the split combine over 8
# warps with every record load in one batch (decode::combine_head_batched) against main's 4-warp loop.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
T0=$(date +%s)
STRIKER_AB_CMB=1 timeout 200 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaAttention.*:CudaPrefillAttention.*:CudaBackend.*' > /tmp/t1.log 2>&1; echo "tests CMB rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t1.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t1.log | head -30
STRIKER_AB_SEL=1 timeout 150 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaBackend.*:CudaNvfp4.*' > /tmp/t2.log 2>&1; echo "tests SEL rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t2.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t2.log | head -30
echo "tests took $(( $(date +%s) - T0 )) s"
ms() { timeout 90 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do
  for A in "--context=8192 --quantization nvfp4" "--context=8192" "--context=100000 --quantization nvfp4" "--context=100000" "--context=8192 --batch 8 --quantization nvfp4" "--context=8192 --batch 8"; do
    case "$A" in
      *nvfp4*) echo "$A: main $(ms X=1)  cmb $(ms STRIKER_AB_CMB=1)  sel $(ms STRIKER_AB_SEL=1)  cmb+sel $(ms STRIKER_AB_CMB=1 STRIKER_AB_SEL=1)" ;;
      *) echo "$A: main $(ms X=1)  cmb $(ms STRIKER_AB_CMB=1)" ;;
    esac
  done
  echo "round $r at $(( $(date +%s) - T0 )) s"
done
tl() { env $1 CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_$2.csv timeout 40 $B/striker bench latency --config $C --graphs $3 --steps 15 --warmup 3 > /dev/null 2>&1; }
tl X=1 nm "--context=8192 --quantization nvfp4"; tl STRIKER_AB_CMB=1 nc "--context=8192 --quantization nvfp4"; tl STRIKER_AB_SEL=1 ns "--context=8192 --quantization nvfp4"
python3 scripts/step_timeline.py /tmp/tl_nm.csv --compare /tmp/tl_nc.csv "NVFP4 8K main vs CMB" | head -16
python3 scripts/step_timeline.py /tmp/tl_nm.csv --compare /tmp/tl_ns.csv "NVFP4 8K main vs SEL" | head -16
python3 scripts/step_timeline.py /tmp/tl_nm.csv "NVFP4 8K main (fd47b52)" | head -60
echo "total $(( $(date +%s) - T0 )) s"
