#!/usr/bin/env bash
# Session 29 run 2 (kernel payload; gpubin/*_base = main's binaries, gpubin/*_fa = main + the fetch-ahead and async parts of .gpu_run/s29.patch,
# gpubin/{striker,bench_cuda_kernels,test_cuda_kernels} = all of s29.patch: that + the grouped NVFP4 tile decoded by byte-permute
# tables straight into bf16, ~3.5 instructions per weight instead of ~6 ("dec", gpubin/*_dec) + the A tiles in a
# ring of their own, 6 k tiles deep for 16-row tiles instead of 1 ahead ("ar": each k tile otherwise waits an L2
# round trip for its activations; prediction: grouped NVFP4 gate/up at T = 64 251.8 -> <= 120 us if that is the
# limit, the stall reasons below say which). Run 1 (docs/performance.md, twenty-ninth session) passed the branch's GPU tests, but its
# base bench binary predated `batched-moe` and `bench latency --batch` refused 9..256 (fixed on main since), so:
# (1) bench_cuda_kernels batched-moe, base / fa / dec / ar;
# (2) bench latency --batch 64 NVFP4 for all four, --batch 16/256 NVFP4 and 64 BF16 (control) base vs ar;
# (3) ncu sections and stall reasons of ar's grouped NVFP4 gate/up and down at 64 sequences: what limits them
#     once the A tiles come early (run 1: 0.2 of 4.6 TB/s on their bytes, BF16 0.9 on the same tiles).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
LIMIT=${S29_LIMIT:-400}
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 $B/test_cuda_kernels --gtest_filter='CudaMoeGrouped*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |^\[==========\]|Failure|FAILED|rror" | head -20
for v in base fa dec ar; do
  bin=$B/bench_cuda_kernels; [ $v != ar ] && bin=$B/bench_$v
  timeout 75 $bin batched-moe 2>&1 | grep -E "grouped T=(8|64|256) (gate|down|all)|per-slot T=8 \(|failed|rror" | sed "s/^/$v /"
  echo "batched-moe $v done at ${SECONDS}s"
done
lat() {  # VARIANT FORMAT BATCH CONTEXT
  [ $SECONDS -gt $(( LIMIT - 120 )) ] && return
  local bin=$B/striker q=""; [ "$1" != ar ] && bin=$B/striker_$1
  [ "$2" = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $bin bench latency --config $C $q --graphs --context $4 --batch $3 --steps 30 --warmup 3 2>&1)
  echo "$1 $2 b$3 ctx$4: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') | $(echo "$r" | grep -oE '[0-9.]+% of the 4.6') | $(echo "$r" | grep -oE 'kernels per step: [0-9]+')$(echo "$r" | grep -m1 -i error)"
}
for v in base fa dec ar; do lat $v nvfp4 64 1024; done
for b in 16 256; do for v in base ar; do lat $v nvfp4 $b 1024; done; done
for v in base ar; do lat $v bf16 64 1024; done
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
