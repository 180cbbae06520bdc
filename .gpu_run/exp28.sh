#!/usr/bin/env bash
# Session 18 run 4: scripts/gpu_conformance.sh on the landed code (the router's selection by ranks, the NVFP4 down
# rows' L2 requests), then a sweep of a one-query step's attention split counts (STRIKER_AB_SPLITS_SLIDING /
# STRIKER_AB_SPLITS_FULL; host-side only: the kernels are the landed ones).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
ms() { timeout 60 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do
  A="--context=8192 --quantization nvfp4"; echo "nvfp4 8K: default $(ms X=1)  S5 $(ms STRIKER_AB_SPLITS_SLIDING=5)  S7 $(ms STRIKER_AB_SPLITS_SLIDING=7)  S17 $(ms STRIKER_AB_SPLITS_SLIDING=17)  F33 $(ms STRIKER_AB_SPLITS_FULL=33)  F44 $(ms STRIKER_AB_SPLITS_FULL=44)"
  A="--context=8192"; echo "bf16 8K: default $(ms X=1)  S5 $(ms STRIKER_AB_SPLITS_SLIDING=5)  S17 $(ms STRIKER_AB_SPLITS_SLIDING=17)  F33 $(ms STRIKER_AB_SPLITS_FULL=33)"
  A="--context=100000 --quantization nvfp4"; echo "nvfp4 100K: default $(ms X=1)  S5 $(ms STRIKER_AB_SPLITS_SLIDING=5)  F44 $(ms STRIKER_AB_SPLITS_FULL=44)"
  A="--context=100000"; echo "bf16 100K: default $(ms X=1)"
done
timeout 400 bash scripts/gpu_conformance.sh gpubin > /tmp/conf.log 2>&1; echo "conformance rc=$?"; grep -E "^\|" /tmp/striker-conformance/conformance_table.md 2>/dev/null | head -20 || tail -20 /tmp/conf.log
