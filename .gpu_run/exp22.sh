#!/usr/bin/env bash
# Session 15, run 8: where the batched down kernel's 1.7 us went — CUPTI timelines of both arms.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
for E in STRIKER_AB_X=0 STRIKER_AB_DOWNB=1; do
env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_${E%%=*}.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 --quantization nvfp4 --steps 15 --warmup 3 > /dev/null 2>&1
python3 scripts/step_timeline.py /tmp/tl_${E%%=*}.csv "$E" | sed -n '/one layer/,$p' | head -9
done
python3 scripts/step_timeline.py /tmp/tl_STRIKER_AB_X.csv --compare /tmp/tl_STRIKER_AB_DOWNB.csv "main down vs batched down" | head -9
