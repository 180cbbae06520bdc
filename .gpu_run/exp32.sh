#!/usr/bin/env bash
# Session 19: the 2-8 token MoE kernels grouped by expert (expert_items.cuh) against the per-slot kernels
# (STRIKER_AB_ITEMS=0: main's kernels). Tests of the grouped form, A/B at batch 8 / 4 / 2 and batch-1 controls,
# timelines of batch 8.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
t() { local name=$1 filt=$2 to=$3; shift 3; env "$@" timeout $to $B/test_cuda_kernels --gtest_brief=1 --gtest_filter="$filt" > /tmp/t_$name.log 2>&1;
  local rc=$?; echo "tests $name rc=$rc $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t_$name.log | sort -u | head -12 | tr '\n' ' ')"; grep -B2 -A8 Failure /tmp/t_$name.log | head -30; return $rc; }
t items 'CudaMoe*:CudaNvfp4.SelectedExperts*:CudaMoeGroupedNvfp4.DecodeSteps*:CudaBackend.*' 200 X=1 || { echo "tests failed: no A/B"; exit 1; }
echo "tests done at ${SECONDS}s"
ms() { timeout 25 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
pct() { timeout 25 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -iE 'roofline|TB/s' | head -2 | tr '\n' ' '; }
for r in 1 2; do for A in "--context=8192 --quantization nvfp4 --batch 8" "--context=8192 --batch 8" "--context=8192 --quantization nvfp4 --batch 4" "--context=8192 --batch 4" "--context=8192 --quantization nvfp4 --batch 2" "--context=8192 --quantization nvfp4" "--context=8192"; do
  echo "$A: slots $(ms STRIKER_AB_ITEMS=0)  items $(ms X=1)"; done; done
for A in "--context=8192 --quantization nvfp4 --batch 8" "--context=8192 --batch 8"; do echo "$A items: $(pct X=1)"; echo "$A slots: $(pct STRIKER_AB_ITEMS=0)"; done
for q in nvfp4 bf16; do for E in STRIKER_AB_ITEMS=0 X=1; do
Q=""; [ $q = nvfp4 ] && Q="--quantization nvfp4"
env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=$OUT/tl_${q}_b8_${E%%=*}.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 --batch 8 $Q --steps 15 --warmup 3 > /dev/null 2>&1
done
python3 scripts/step_timeline.py $OUT/tl_${q}_b8_STRIKER_AB_ITEMS.csv --compare $OUT/tl_${q}_b8_X.csv "$q b8 slots vs items" | head -12
done
echo "all done at ${SECONDS}s"
