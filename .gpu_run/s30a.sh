#!/usr/bin/env bash
# Session 30 run 1 (kernel payload): gpubin/*_base = main's binaries (bedf29f); gpubin/{striker,bench_cuda_kernels,
# test_cuda_kernels} = main + the then .gpu_run/s29.patch (since merged) (grouped NVFP4 fetch-ahead, bf16x2 tile decode, the A tiles in a
# ring of their own; async scheduling on by default). The session-29 fa/dec intermediates are not rebuilt (one patch):
# base vs all. Prediction (session 29): grouped NVFP4 gate/up at T = 64 251.8 -> <= 120 us, down 123.9 -> <= 60,
# the NVFP4 64-sequence step 22.8 -> ~15-17 ms; T <= 8 and batch 1 unchanged (controls).
# (1) the branch's grouped and forward tests; (2) bench_cuda_kernels batched-moe base vs ar;
# (3) bench latency NVFP4 b64/b16/b256 at 1K, BF16 b64, b1/b8 NVFP4 8K controls, base vs ar;
# (4) ncu sections + stall reasons of ar's grouped NVFP4 gate/up and down at 64 sequences.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
LIMIT=${S30_LIMIT:-300}
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 90 $B/test_cuda_kernels --gtest_filter='CudaMoeGrouped*:CudaBackend.*:CudaSampling*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |^\[==========\]|Failure|FAILED|rror" | head -30
echo "tests done at ${SECONDS}s"
for v in base ar; do
  bin=$B/bench_cuda_kernels; [ $v != ar ] && bin=$B/bench_$v
  timeout 60 $bin batched-moe 2>&1 | grep -E "grouped T=(8|64|256) (gate|down|all)|per-slot T=8 \(|failed|rror" | sed "s/^/$v /"
  echo "batched-moe $v done at ${SECONDS}s"
done
lat() {  # VARIANT FORMAT BATCH CONTEXT
  [ $SECONDS -gt $(( LIMIT - 100 )) ] && return
  local bin=$B/striker q=""; [ "$1" != ar ] && bin=$B/striker_$1
  [ "$2" = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $bin bench latency --config $C $q --graphs --context $4 --batch $3 --steps 30 --warmup 3 2>&1)
  echo "$1 $2 b$3 ctx$4: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') | $(echo "$r" | grep -oE '[0-9.]+% of the 4.6') | $(echo "$r" | grep -oE 'kernels per step: [0-9]+')$(echo "$r" | grep -m1 -i error)"
}
for v in base ar; do lat $v nvfp4 64 1024; done
for v in base ar; do lat $v bf16 64 1024; done
for b in 16 256; do for v in base ar; do lat $v nvfp4 $b 1024; done; done
for b in 1 8; do for v in base ar; do lat $v nvfp4 $b 8192; done; done
echo "latency done at ${SECONDS}s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ $SECONDS -le $(( LIMIT - 45 )) ]; then
  v=ar bin=$B/striker
  # Two grouped launches per layer (gate/up, down): skip 10 layers, profile one layer's pair.
  timeout 60 "$NCU" --csv --page details --clock-control none --cache-control none -k 'regex:grouped_gemm_kernel' \
    --launch-skip 20 --launch-count 2 --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis \
    --metrics smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio \
    $bin bench latency --config $C --quantization nvfp4 --context 1024 --batch 64 --steps 1 --warmup 0 > /tmp/ncu_$v.csv 2>&1
  echo "ncu $v rc=$? at ${SECONDS}s"
  grep -E '"(Grid Size|Registers Per Thread|Duration|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued Instruction|Stall [A-Za-z ]+|Mem Pipes Busy|Block Limit [A-Za-z ]+|smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio)"' /tmp/ncu_$v.csv |
    awk -F'","' '{print $5 " | " $(NF-2) " | " $NF}' | tr -d '"' | sed "s/^/$v /" | head -90
fi
echo "all done at ${SECONDS}s"
