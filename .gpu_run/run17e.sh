#!/usr/bin/env bash
# Session 17, run 5: the selection's cycles (select_probe), and the router with the 8 sigmoids' divisions
# written branch-free (STRIKER_AB_RCP=1; same bits by construction) against main.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
T0=$(date +%s)
/tmp/select_probe 2>&1 | tail -3
STRIKER_AB_RCP=1 timeout 100 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaRouter*:CudaBackend.ForwardMatches*:CudaBackend.Nvfp4ForwardMatches*' > /tmp/t.log 2>&1; echo "tests RCP rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t.log | head -30
echo "tests took $(( $(date +%s) - T0 )) s"
ms() { timeout 90 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do
  for A in "--context=8192 --quantization nvfp4" "--context=8192" "--context=100000 --quantization nvfp4"; do
    echo "$A: main $(ms X=1)  rcp $(ms STRIKER_AB_RCP=1)"
  done
done
tl() { env $1 CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_$2.csv timeout 40 $B/striker bench latency --config $C --graphs $3 --steps 15 --warmup 3 > /dev/null 2>&1; }
tl X=1 nm "--context=8192 --quantization nvfp4"; tl STRIKER_AB_RCP=1 nr "--context=8192 --quantization nvfp4"
python3 scripts/step_timeline.py /tmp/tl_nm.csv --compare /tmp/tl_nr.csv "NVFP4 8K main vs RCP" | head -10
echo "total $(( $(date +%s) - T0 )) s"
