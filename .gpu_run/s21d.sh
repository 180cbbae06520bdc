#!/usr/bin/env bash
# Session 21, run 5: the cut path at one row, attributed: each kernel's duration in one sample_rows call (top_p=0.9,
# 1 row and 64 rows), and digit 4's warp-stall samples per SASS line.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
mkdir -p "${OUT:-/tmp/out}"; L=${OUT:-/tmp/out}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
T="$B/test_cuda_kernels --gtest_filter=CudaSampling.PrintsTimingAtFlintSize"
for sk in 264 341; do
  timeout 120 $NCU --clock-control none --cache-control none --kernel-name 'regex:candidates_kernel|cut_digit|race_kernel|sample_kernel' \
    --launch-skip $sk --launch-count 7 --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum --csv $T > $L/dur_$sk.csv 2>&1
  echo "== skip $sk rc=$?"; grep -E 'gpu__time|inst_exec' $L/dur_$sk.csv | awk -F'","' '{print $5" | "$(NF-2)" | "$(NF)}' | sed -E 's/\(const float.*\)//' | head -30
done
timeout 150 $NCU --clock-control none --cache-control none --kernel-name regex:cut_digit --launch-skip 0 --launch-count 1 \
  --section WarpStateStats --section SourceCounters -o $L/d4 $T > $L/d4.log 2>&1; echo "== d4 rc=$?"
$NCU -i $L/d4.ncu-rep --page source --csv --print-source sass > $L/d4_src.csv 2>&1; echo "source rc=$?"
python3 - "$L/d4_src.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hdr = next((i for i, r in enumerate(rows) if any("Sampling" in c for c in r)), None)
if hdr is None: print("no sampling column; first lines:", rows[:3]); sys.exit()
h = rows[hdr]; print([c for c in h][:12])
si = next(i for i, c in enumerate(h) if "Sampling (All" in c)
src = next((i for i, c in enumerate(h) if c.lower() in ("source", "sass")), 1)
data = []
for r in rows[hdr + 1:]:
    try: data.append((float(r[si] or 0), r))
    except (ValueError, IndexError): pass
tot = sum(d[0] for d in data) or 1
print("total samples", tot)
for v, r in sorted(data, key=lambda d: -d[0])[:30]:
    print(f"{v/tot*100:5.1f}%  {r[0][:10]}  {r[src][:90]}")
PY
echo "done at ${SECONDS}s"
