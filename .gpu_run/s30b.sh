#!/usr/bin/env bash
# Session 30 run 2 (kernel payload): gpubin/*_ar = main's grouped NVFP4 kernels (fetch-ahead + bf16x2 decode + A ring,
# merged in bfc3a76); gpubin/{striker,bench_cuda_kernels,test_cuda_kernels} = branch s30-regs: each warp decodes its own
# weights straight into mma B fragments (no st.shared / ldmatrix / barrier for the weights; k order of nvfp4_frag_k).
# Prediction (run 1's ncu: short scoreboard 1.90 and barrier 0.35 stall cycles per instruction, ~24 -> ~16 MIO
# instructions per warp and k tile): grouped NVFP4 gate/up at T = 64 188 -> ~140-150 us (H100), down 91 -> ~70;
# the 64-sequence NVFP4 step -8 to -12 %; TM 64 tiles (T = 683..1023, 206 registers now: 2 CTAs per SM) may lose.
# (1) the grouped NVFP4 and NVFP4 forward tests; (2) batched-moe ar vs regs; (3) bench latency NVFP4 b16/64/256 at
# 1K and b800 at 256 (TM 64), ar vs regs; (4) ncu of regs' gate/up and down at 64 sequences.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LIMIT=${S30_LIMIT:-330}
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 $B/test_cuda_kernels --gtest_filter='CudaMoeGroupedNvfp4.*:CudaBackend.Nvfp4*' > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|Failure|FAILED" $OUT/tests.txt | head -20
for v in ar regs; do
  bin=$B/bench_cuda_kernels; [ $v != regs ] && bin=$B/bench_$v
  timeout 75 $bin batched-moe > $OUT/bm_$v.txt 2>&1
  grep -E "nvfp4 moe grouped T=(8|64|256) (gate|down|all)|nvfp4 moe per-slot|failed" $OUT/bm_$v.txt | cut -c1-100 | sed "s/^/$v /"
  echo "batched-moe $v done at ${SECONDS}s"
done
lat() {  # VARIANT FORMAT BATCH CONTEXT
  [ $SECONDS -gt $(( LIMIT - 80 )) ] && return
  local bin=$B/striker q=""; [ "$1" != regs ] && bin=$B/striker_$1
  [ "$2" = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $bin bench latency --config $C $q --graphs --context $4 --batch $3 --steps 20 --warmup 3 2>&1)
  echo "$1 $2 b$3 ctx$4: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') | $(echo "$r" | grep -oE '[0-9.]+% of the 4.6')$(echo "$r" | grep -m1 -i error)"
}
for v in ar regs; do lat $v nvfp4 64 1024; done
for b in 16 256; do for v in ar regs; do lat $v nvfp4 $b 1024; done; done
for v in ar regs; do lat $v nvfp4 800 256; done
for v in ar regs; do lat $v nvfp4 64 1024; done
echo "latency done at ${SECONDS}s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ $SECONDS -le $(( LIMIT - 40 )) ]; then
  timeout 50 "$NCU" --csv --page details --clock-control none --cache-control none -k 'regex:grouped_gemm_kernel' \
    --launch-skip 20 --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --metrics smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio \
    $B/striker bench latency --config $C --quantization nvfp4 --context 1024 --batch 64 --steps 1 --warmup 0 > $OUT/ncu_regs.csv 2>&1
  echo "ncu rc=$? at ${SECONDS}s"
  grep -E '"(Duration|DRAM Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Registers Per Thread|Achieved Occupancy|No Eligible|Warp Cycles Per Issued Instruction|smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio)"' $OUT/ncu_regs.csv |
    awk -F'","' '{print $5 " | " $(NF-2) " | " $NF}' | tr -d '"' | sed -E 's/void .*grouped_gemm_kernel<([0-9]+), ([0-9]),.*\)/TM\1 NB\2/; s/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -40
fi
echo "all done at ${SECONDS}s"
