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
    RUNS=("--context=100000" "--context=100000 --graphs" "--context=8192")
  fi
  for args in "${RUNS[@]}"; do
    echo "== striker bench latency $args" | tee -a "$LOGS/latency.log"
    # shellcheck disable=SC2086
    "$BIN/striker" bench latency --config "$CONFIG" $args >>"$LOGS/latency.log" 2>&1 || latency_rc=$?
  done
  # STRIKER_PREFILL_RUNS: ';'-separated argument lists for `striker bench prefill`.
  IFS=';' read -ra PRE <<<"${STRIKER_PREFILL_RUNS:---tokens=2048 --repeats=1;--tokens=8192 --repeats=1}"
  for args in "${PRE[@]}"; do
    echo "== striker bench prefill $args" | tee -a "$LOGS/latency.log"
    # shellcheck disable=SC2086
    timeout 200 "$BIN/striker" bench prefill --config "$CONFIG" $args >>"$LOGS/latency.log" 2>&1 || latency_rc=$?
  done
fi

echo
[ -s "$LOGS/latency.log" ] && cat "$LOGS/latency.log"
grep -vE "^\|" "$LOGS/bench.log" | tail -5
grep -E "^\|" "$LOGS/bench.log"
echo "tests rc=$tests_rc: $(grep -E "^\[  (PASSED|FAILED)  \]" "$LOGS/tests.log" | tr "\n" " ")bench rc=$bench_rc, latency rc=$latency_rc"
[ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
