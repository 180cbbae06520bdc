#!/usr/bin/env bash
# Session 17, run 3: the batched split combine in three shapes (STRIKER_AB_CMB: 1 = 8 warps x 9 splits always
# (run 2); 2 = that above 36 splits, else 4 warps x 9; 3 = 4 warps x 17 above 36 splits, else 4 x 9), and a
# timing probe of the selection inside the NVFP4 gate/up (STRIKER_AB_SEL=2: logits read, fixed ids, no selection;
# wrong routing, timing only) against SEL=1 (run 2's selection in the gate/up kernel).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
T0=$(date +%s)
for v in 2 3; do
STRIKER_AB_CMB=$v timeout 120 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaAttention.*:CudaPrefillAttention.*:CudaBackend.*' > /tmp/t$v.log 2>&1; echo "tests CMB=$v rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t$v.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t$v.log | head -30
done
echo "tests took $(( $(date +%s) - T0 )) s"
ms() { timeout 90 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do
  for A in "--context=8192 --quantization nvfp4" "--context=8192" "--context=100000 --quantization nvfp4" "--context=100000" "--context=8192 --batch 8 --quantization nvfp4" "--context=8192 --batch 8"; do
    echo "$A: main $(ms X=1)  cmb1 $(ms STRIKER_AB_CMB=1)  cmb2 $(ms STRIKER_AB_CMB=2)  cmb3 $(ms STRIKER_AB_CMB=3)"
  done
  A="--context=8192 --quantization nvfp4"; echo "nvfp4 8K sel=1 $(ms STRIKER_AB_SEL=1)  sel=2 (probe) $(ms STRIKER_AB_SEL=2)"
  echo "round $r at $(( $(date +%s) - T0 )) s"
done
tl() { env $1 CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_$2.csv timeout 40 $B/striker bench latency --config $C --graphs $3 --steps 15 --warmup 3 > /dev/null 2>&1; }
tl X=1 nm "--context=8192 --quantization nvfp4"; tl STRIKER_AB_CMB=3 n3 "--context=8192 --quantization nvfp4"
tl STRIKER_AB_SEL=1 s1 "--context=8192 --quantization nvfp4"; tl STRIKER_AB_SEL=2 s2 "--context=8192 --quantization nvfp4"
tl X=1 b8m "--context=8192 --batch 8"; tl STRIKER_AB_CMB=1 b81 "--context=8192 --batch 8"
python3 scripts/step_timeline.py /tmp/tl_nm.csv --compare /tmp/tl_n3.csv "NVFP4 8K main vs CMB=3" | head -14
python3 scripts/step_timeline.py /tmp/tl_s1.csv --compare /tmp/tl_s2.csv "NVFP4 8K SEL=1 vs SEL=2 probe" | head -10
python3 scripts/step_timeline.py /tmp/tl_b8m.csv --compare /tmp/tl_b81.csv "BF16 8K batch 8 main vs CMB=1" | head -14
python3 scripts/step_timeline.py /tmp/tl_n3.csv "NVFP4 8K CMB=3" | sed -n '/one layer/,$p' | head -10
echo "total $(( $(date +%s) - T0 )) s"
