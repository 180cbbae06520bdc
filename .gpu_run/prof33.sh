#!/usr/bin/env bash
# Session 19: ncu sections of main's batch-8 MoE kernels (STRIKER_AB_ITEMS=0 runs main's per-slot kernels):
# why the NVFP4 gate/up streams at ~1.9 TB/s and the down at ~1.9 at 8 sequences.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for spec in "nvfp4:nvfp4_moe_gate_up_kernel" "nvfp4:nvfp4_moe_down_slots_mma_kernel" "bf16:moe_gate_up_kernel" "bf16:moe_down_slots_kernel"; do
  q=${spec%%:*}; k=${spec#*:}; Q=""; [ $q = nvfp4 ] && Q="--quantization nvfp4"
  log=$OUT/ncu_${k}.csv
  STRIKER_AB_ITEMS=0 timeout 120 $NCU --csv --page details --clock-control none --cache-control none -k "regex:${k}" --launch-skip 20 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
    $B/striker bench latency --config $C $Q --context=8192 --batch 8 --steps 1 --warmup 0 > $log 2> $log.err
  echo "== $k rc=$?"
  python3 - "$log" <<'PY'
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
i = [k for k, l in enumerate(lines) if l.startswith('"ID"')]
if not i: print("no data"); sys.exit()
rows = list(csv.reader(lines[i[0]:]))
h = rows[0]
want = ("Duration", "DRAM Throughput", "Memory Throughput", "Registers Per Thread", "Grid Size", "Block Size", "Waves Per SM",
        "Achieved Occupancy", "Theoretical Occupancy", "No Eligible", "Issued Warp Per Scheduler", "Warp Cycles Per Issued Instruction",
        "L2 Hit Rate", "Compute (SM) Throughput", "SM Active Cycles", "Elapsed Cycles", "Block Limit Registers")
out = []
for r in rows[1:]:
    d = dict(zip(h, r))
    if d.get("Metric Name") in want: out.append(f'{d["Metric Name"]}={d["Metric Value"]}')
print("; ".join(out))
PY
done
echo "done at ${SECONDS}s"
