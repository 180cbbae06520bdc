#!/usr/bin/env bash
# Session 32 run 7: why the 16-row NVFP4 gate/up streams only ~9.5 KB of codes per µs per SM whatever its
# occupancy (T = 9 at 3 CTAs/SM: 46 µs; T = 16 at 5/SM: 80 µs, ~1.2 TB/s of the H100's 3.35). ncu sections of the
# NVFP4 grouped kernels at T = 16 (gate/up wide + down) and T = 9 (gate/up deep), and the gate/up's SASS mix.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats"
for T in 16 9; do
  timeout 150 $NCU --kernel-name-base demangled --kernel-name regex:'Nvfp4' --launch-count 2 $S $B/bench_cuda_kernels batched-moe $T > $OUT/ncu_$T.txt 2>&1
  echo "ncu T=$T rc=$?"
  grep -E 'grouped_gemm|Duration|DRAM Throughput|Memory Throughput|L2 Hit|L1/TEX Hit|Issue Slots Busy|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Achieved Occupancy|Theoretical Occupancy|Registers Per|Executed Ipc A|Stall|Mem Busy|Max Bandwidth|Mem Pipes' $OUT/ncu_$T.txt | head -70
done
CO=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
if [ -n "$CO" ]; then
  $CO -sass $B/bench_cuda_kernels 2>/dev/null | awk '/Function : .*Nvfp4FragmentWeightsWide/{on=1; next} /Function :/{on=0} on' > $OUT/wide.sass
  echo "wide SASS lines: $(wc -l < $OUT/wide.sass)"
  grep -oE '^\s+/\*[0-9a-f]+\*/\s+[A-Z0-9_.]+' $OUT/wide.sass | awk '{print $2}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -25 | paste -sd' '
fi
echo "all done at ${SECONDS}s"
