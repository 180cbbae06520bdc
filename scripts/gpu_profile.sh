#!/usr/bin/env bash
# The decode step's honest profile (issue 11): per-kernel device time and DRAM bytes of one
# batch-1 decode step under ncu (real clocks, caches not flushed; each kernel replayed alone),
# summarised per kernel family by scripts/ncu_summary.py, for BF16 and NVFP4 at the contexts in
# STRIKER_PROFILE_CONTEXTS (default "8192 100000"; "" for none). STRIKER_PROFILE_PREFILL="8192" adds one
# prefill chunk of that many tokens, BF16 and NVFP4: the kernels of a few middle layers only
# (STRIKER_PROFILE_PREFILL_SKIP launches skipped, STRIKER_PROFILE_PREFILL_COUNT profiled; ncu replays
# each kernel, so a whole 49-layer chunk would take minutes). STRIKER_PROFILE_MOE_SOL="8192" adds ncu's
# speed-of-light and memory-workload sections for the BF16 grouped wgmma expert kernels (gate/up and
# down of one middle layer) of a prefill chunk of that many tokens: whether L2 -> SM transfer, HBM or
# the tensor pipes bound them (docs/performance.md, seventh session: bytes into each SM, not stage
# latency, looked like the limit). STRIKER_PROFILE_TIMELINE="bf16:8192 nvfp4:100000 bf16:8192:8 ..."
# (format:context[:batch]) traces `bench latency --graphs` with the CUPTI injection library
# (BIN_DIR/libstriker_kernel_trace.so, tests/cuda/profiling) and prints each kernel's share of the
# replayed step (scripts/step_timeline.py): kernels overlap through PDL as they do when serving, unlike
# ncu's one-at-a-time replays; `scripts/step_timeline.py A.csv --compare B.csv` sets two traces (an A/B)
# side by side per kernel family. STRIKER_PROFILE_ATTN_SOL="100000" adds ncu's speed-of-light, memory-workload,
# occupancy and warp-state sections for the decode attention split kernel of one batch-1 BF16 step at that
# context: layer 2 (sliding) and layer 3 (the first full layer), each replayed alone — whether HBM, the issue
# of the tile math or the warps' stalls bound the full layers (0.78–0.87 of 4.6 TB/s at 100K in the step).
# Usage: bash scripts/gpu_profile.sh BIN_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-gpubin}
CONFIG=${STRIKER_GPU_CONFIG:-$BIN/config.json}
[ -f "$CONFIG" ] || CONFIG=../shared/fixtures/flint-config/config.json
LOGS=${OUT:-/tmp/striker-gpu}
mkdir -p "$LOGS"
for spec in ${STRIKER_PROFILE_TIMELINE:-}; do
  IFS=: read -r q ctx batch <<<"$spec"
  batch=${batch:-1}
  trace="$LOGS/timeline_${q}_${ctx}_b${batch}.csv"
  qarg=""; [ "$q" = nvfp4 ] && qarg="--quantization nvfp4"
  CUDA_INJECTION64_PATH="$PWD/$BIN/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE="$trace" \
    timeout 300 "$BIN/striker" bench latency --config "$CONFIG" $qarg --graphs --context="$ctx" --batch "$batch" \
    --steps 20 --warmup 3 >"$trace.log" 2>&1
  echo "timeline $q $ctx batch $batch rc=$?"; grep -E "ms/step|device|kernels" "$trace.log" | head -4
  python3 scripts/step_timeline.py "$trace" "$q decode step, context $ctx, batch $batch (CUPTI, graph replays)"
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "ncu not found: no profile taken"; exit 3; }
for q in bf16 nvfp4; do
  for ctx in ${STRIKER_PROFILE_CONTEXTS-8192 100000}; do
    log="$LOGS/ncu_${q}_${ctx}.csv"
    qarg=""; [ "$q" = nvfp4 ] && qarg="--quantization nvfp4"
    timeout 300 "$NCU" --csv --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum -k 'regex:^(?!fill|nvfp4_fill|to_f32|kv_fill).*' \
      "$BIN/striker" bench latency --config "$CONFIG" $qarg --context="$ctx" --steps 1 --warmup 0 \
      >"$log" 2>"$log.err"
    echo "ncu $q $ctx rc=$?"
    python3 scripts/ncu_summary.py "$log" "$q decode step at context $ctx (ncu, real clocks, each kernel alone)"
  done
done
for tokens in ${STRIKER_PROFILE_PREFILL:-}; do
  for q in bf16 nvfp4; do
    log="$LOGS/ncu_prefill_${q}_${tokens}.csv"
    qarg=""; [ "$q" = nvfp4 ] && qarg="--quantization nvfp4"
    timeout 300 "$NCU" --csv --clock-control none --cache-control none \
      --launch-skip "${STRIKER_PROFILE_PREFILL_SKIP:-300}" --launch-count "${STRIKER_PROFILE_PREFILL_COUNT:-60}" \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum -k 'regex:^(?!fill|nvfp4_fill|to_f32|kv_fill).*' \
      "$BIN/striker" bench prefill --config "$CONFIG" $qarg --tokens="$tokens" --repeats 1 \
      >"$log" 2>"$log.err"
    echo "ncu prefill $q $tokens rc=$?"
    python3 scripts/ncu_summary.py "$log" "$q prefill of $tokens tokens, ${STRIKER_PROFILE_PREFILL_COUNT:-60} kernels of middle layers (ncu, real clocks)"
  done
done
for tokens in ${STRIKER_PROFILE_MOE_SOL:-}; do
  log="$LOGS/ncu_moe_sol_${tokens}.csv"
  # Launch 40 onwards skips the first layers; two launches = one layer's gate/up and down.
  timeout 300 "$NCU" --csv --page details --clock-control none --cache-control none \
    -k 'regex:grouped_wgmma_kernel' --launch-skip 40 --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    "$BIN/striker" bench prefill --config "$CONFIG" --tokens="$tokens" --repeats 1 >"$log" 2>"$log.err"
  echo "ncu grouped wgmma sections, prefill $tokens rc=$?"
  # Grid Size tells the layers apart: 4 KV heads x splits (sliding 9 or 5, full 66 at one sequence).
  grep -E '"(Grid Size|Duration|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Mem Busy|Max Bandwidth|L2 Hit Rate|L1/TEX Hit Rate|Achieved Occupancy|Mem Pipes Busy)"' "$log" |
    awk -F'","' '{print $5 " | " $(NF-2) " | " $NF}' | tr -d '"' | head -40
done
for ctx in ${STRIKER_PROFILE_ATTN_SOL:-}; do
  log="$LOGS/ncu_attn_sol_${ctx}.csv"
  # attention_pipe_kernel launches: one per layer of the step; skip 2 = layer 2 (sliding), then layer 3 (full).
  timeout 300 "$NCU" --csv --page details --clock-control none --cache-control none \
    -k 'regex:attention_pipe_kernel' --launch-skip 2 --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section LaunchStats "$BIN/striker" bench latency --config "$CONFIG" --context="$ctx" --steps 1 --warmup 0 \
    >"$log" 2>"$log.err"
  echo "ncu decode attention sections, context $ctx (layers 2 and 3) rc=$?"
  # Grid Size tells the layers apart: 4 KV heads x splits (sliding 9 or 5, full 66 at one sequence).
  grep -E '"(Grid Size|Duration|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued Instruction|Avg. Active Threads Per Warp|Stall [A-Za-z ]+)"' "$log" |
    awk -F'","' '{print $5 " | " $(NF-2) " | " $NF}' | tr -d '"' | head -60
done
