#!/usr/bin/env bash
# Runs every GPU test and benchmark on a machine with an NVIDIA GPU and ends with a short table:
#   kernel | check (max error ratio vs the CPU reference, <= 1 passes) | µs | GB/s | fraction of 4.1 TB/s
# Binaries are taken from $STRIKER_GPU_BIN, ./gpubin (copied there by whoever ships them to the
# GPU machine) or ./build; if none exist, the GPU targets are built first.
# Logs go to $OUT (the device tool's result folder) or /tmp/striker-gpu.
set -uo pipefail
cd "$(dirname "$0")/.."

BIN=${STRIKER_GPU_BIN:-}
if [ -z "$BIN" ]; then
  for d in gpubin build/tests/cuda; do
    if [ -x "$d/test_cuda_kernels" ]; then BIN=$d; break; fi
  done
fi
if [ -z "$BIN" ]; then
  echo "== building the GPU targets"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release &&
    cmake --build build -j "$(nproc)" --target test_cuda_kernels bench_cuda_kernels ||
    { echo "error: could not build the GPU targets"; exit 2; }
  BIN=build/tests/cuda
fi
LOGS=${OUT:-/tmp/striker-gpu}
mkdir -p "$LOGS"
# Shared libraries shipped beside the binaries (e.g. cuBLASLt of the right major version).
export LD_LIBRARY_PATH="$PWD/$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if ! nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv,noheader; then
  echo "no GPU here: nothing was run (GPU tests are NOT reported as passed)"
  exit 3
fi

echo "== kernel tests"
"$BIN/test_cuda_kernels" --gtest_brief=1 >"$LOGS/tests.log" 2>&1
tests_rc=$?
grep -E "^\[  (FAILED|PASSED) |Failure|error|expected|max_ratio|backend vs reference|top_p-boundary|MISMATCH|sampling timing" "$LOGS/tests.log" | head -60

if [ "${STRIKER_GPU_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck on the kernel tests"
  timeout 180 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/test_cuda_kernels" --gtest_brief=1 \
    >"$LOGS/memcheck.log" 2>&1
  echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$LOGS/memcheck.log" | tail -1)"
fi

echo "== kernel benchmarks"
"$BIN/bench_cuda_kernels" >"$LOGS/bench.log" 2>&1
bench_rc=$?

latency_rc=skipped
if [ -x "$BIN/striker" ]; then
  CONFIG=${STRIKER_GPU_CONFIG:-$BIN/config.json}
  [ -f "$CONFIG" ] || CONFIG=../shared/fixtures/flint-config/config.json
  : >"$LOGS/latency.log"
  latency_rc=0
  # STRIKER_LATENCY_RUNS: ';'-separated argument lists, one run each.
  if [ -n "${STRIKER_LATENCY_RUNS:-}" ]; then
    IFS=';' read -ra RUNS <<<"$STRIKER_LATENCY_RUNS"
  else
    RUNS=("--context=100000" "--context=100000 --graphs" "--context=8192" "--quantization nvfp4 --context=100000")
  fi
  for args in "${RUNS[@]}"; do
    echo "== striker bench latency $args" | tee -a "$LOGS/latency.log"
    # shellcheck disable=SC2086
    "$BIN/striker" bench latency --config "$CONFIG" $args >>"$LOGS/latency.log" 2>&1 || latency_rc=$?
  done
  # STRIKER_PREFILL_RUNS: ';'-separated argument lists for `striker bench prefill`.
  IFS=';' read -ra PRE <<<"${STRIKER_PREFILL_RUNS:---tokens=2048 --repeats=1;--tokens=8192 --repeats=1;--tokens=8192 --repeats=1 --quantization nvfp4}"
  for args in "${PRE[@]}"; do
    echo "== striker bench prefill $args" | tee -a "$LOGS/latency.log"
    # shellcheck disable=SC2086
    timeout 200 "$BIN/striker" bench prefill --config "$CONFIG" $args >>"$LOGS/latency.log" 2>&1 || latency_rc=$?
  done
  # Offline throughput through the engine (dummy weights on the GPU), like `vllm bench throughput`.
  TOKENIZER=${STRIKER_GPU_TOKENIZER:-$BIN/flint-tokenizer}  # scripts/ship_gpu.sh puts it there
  [ -f "$TOKENIZER/tokenizer.json" ] || TOKENIZER=../shared/fixtures/flint-tokenizer
  # STRIKER_THROUGHPUT_RUNS: ';'-separated argument lists, one `striker bench throughput` each.
  IFS=';' read -ra THR <<<"${STRIKER_THROUGHPUT_RUNS:---num-prompts 64 --input-len 1024 --output-len 128;--num-prompts 64 --input-len 1024 --output-len 128 --quantization nvfp4}"
  for args in "${THR[@]}"; do
    echo "== striker bench throughput $args" | tee -a "$LOGS/latency.log"
    # shellcheck disable=SC2086
    timeout 240 "$BIN/striker" bench throughput --config "$CONFIG" --tokenizer "$TOKENIZER" $args \
      >>"$LOGS/latency.log" 2>&1 || latency_rc=$?
  done
fi

# GPU-vs-CPU teacher-forced conformance (FLINT.md §4 rule), the server's end-to-end suites on
# --device cuda and the serving benchmark (`vllm bench serve`-style, full config, dummy weights);
# long context (scripts/gpu_long_context.sh: ~100K positions against the torch reference, one 262K request);
# STRIKER_GPU_SKIP="conformance server serve_bench long_context" leaves any out (reported as not run).
SKIP=" ${STRIKER_GPU_SKIP:-} "
# run_part NAME TITLE SCRIPT LOG: `bash scripts/SCRIPT $BIN` into $LOGS/LOG unless NAME is in
# STRIKER_GPU_SKIP (or there is no striker binary); sets NAME_rc to its exit status or "not run".
run_part() {
  local name=$1 title=$2 script=$3 log=$4
  printf -v "${name}_rc" '%s' "not run"
  if [[ "$SKIP" != *" $name "* ]] && [ -x "$BIN/striker" ]; then
    echo "== $title (scripts/$script)"
    bash "scripts/$script" "$BIN" >"$LOGS/$log" 2>&1
    printf -v "${name}_rc" '%s' "$?"
  fi
}
run_part conformance "GPU vs CPU conformance" gpu_conformance.sh conformance.log
run_part server "server end-to-end tests on cuda" gpu_server_tests.sh server_summary.log
run_part serve_bench "end-to-end serving benchmark (full output in serve_bench/)" gpu_serve_bench.sh serve_bench.log
run_part long_context "long context: 100K vs the torch reference, a 262K request" gpu_long_context.sh long_context.log

echo
[ -s "$LOGS/latency.log" ] && cat "$LOGS/latency.log"
grep -vE "^\|" "$LOGS/bench.log" | tail -5
grep -E "^\|" "$LOGS/bench.log"
[ -s "$LOGS/conformance.log" ] && grep -E "^\||PASS|FAIL|ERROR" "$LOGS/conformance.log" | tail -30
[ -s "$LOGS/server_summary.log" ] && cat "$LOGS/server_summary.log"
# The serving table, the servers' startup lines and any failure (not the per-run result blocks).
[ -s "$LOGS/serve_bench.log" ] && grep -E "^(\||== |serve bench|striker serve:|  KV cache|  ready in|ready after|project target)|[Ee]rror" "$LOGS/serve_bench.log"
[ -s "$LOGS/long_context.log" ] && grep -vE "^(chunks|decode|one) .*: [0-9]+ s$" "$LOGS/long_context.log" | tail -40
echo "tests rc=$tests_rc: $(grep -E "^\[  (PASSED|FAILED)  \]" "$LOGS/tests.log" | tr "\n" " ")bench rc=$bench_rc, latency rc=$latency_rc, conformance rc=$conformance_rc, server rc=$server_rc, serve bench rc=$serve_bench_rc, long context rc=$long_context_rc"
[ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
