#!/usr/bin/env bash
# End-to-end serving numbers on the GPU, as `vllm bench serve` measures them (called by scripts/gpu.sh):
# `striker serve` on the full Flint config with random weights (--load-format dummy --device cuda),
# then bench/serve_bench.py (standard-library Python) against it over HTTP, per weight format:
#   long: one request, a 100,000-token random prompt, 256 output tokens (ignore_eos), after one
#         unmeasured warm-up of the same shape - the headline "single request at 100K": TTFT is the
#         prefill as a client sees it, TPOT / 1000/TPOT the decode speed.
#   c64:  128 requests of 1024 → 128 tokens, at most 64 in flight.
#   multi_turn: bench/multi_turn_bench.py, a 3-turn chat whose first prompt has 32,000 tokens (200
#         new tokens a turn, 64-token answers): TTFT per turn with prefix caching and the turn-2/turn-1
#         ratio (issue 12's target: at most 0.10).
# Ends with one table (bench/serve_summary.py). Results (JSON) and server logs go to $OUT/serve_bench.
# Knobs: STRIKER_SERVE_BENCH_FORMATS ("bf16 nvfp4"), STRIKER_SERVE_BENCH_SERVE_ARGS (extra `serve`
# flags; default --max-num-batched-tokens 8192, vLLM's default chunk for online serving on big GPUs),
# STRIKER_SERVE_BENCH_PORT (8321), STRIKER_SERVE_BENCH_DIR (log folder under $OUT, serve_bench),
# STRIKER_SERVE_BENCH_WARMUPS (warm-ups before the long run, 1), STRIKER_SERVE_BENCH_LONG_LIMIT (its
# seconds, 150; scripts/gpu_long_context.sh sends one 262K prompt); for a CPU rehearsal of this script (tests/python/test_bench_serve.py)
# STRIKER_SERVE_BENCH_DEVICE=cpu and the shapes STRIKER_SERVE_BENCH_LONG="100000 256" (input output)
# and STRIKER_SERVE_BENCH_CONC="128 64 1024 128" (prompts, concurrency, input, output; "" leaves it out), and
# STRIKER_SERVE_BENCH_MULTI_TURN="32000 3 200 64" (first-turn tokens, turns, tokens per turn, output; "" leaves it out);
# STRIKER_SERVE_BENCH_LONG_ARGS: extra serve_bench.py flags for the long run (e.g. "--top-p 0.9 --top-k -1": its
# sampling parameters instead of the model's generation_config).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BIN=${1:?usage: gpu_serve_bench.sh BIN_DIR}
LOGS=${OUT:-/tmp/striker-gpu}/${STRIKER_SERVE_BENCH_DIR:-serve_bench}
mkdir -p "$LOGS"
CONFIG=${STRIKER_GPU_CONFIG:-$BIN/config.json}
[ -f "$CONFIG" ] || CONFIG=../shared/fixtures/flint-config/config.json
TOKENIZER=${STRIKER_GPU_TOKENIZER:-$BIN/flint-tokenizer}
[ -f "$TOKENIZER/tokenizer.json" ] || TOKENIZER=../shared/fixtures/flint-tokenizer
for f in "$CONFIG" "$TOKENIZER/tokenizer.json"; do
  [ -f "$f" ] || { echo "serve bench: $f not found (run scripts/ship_gpu.sh or set STRIKER_GPU_CONFIG/TOKENIZER)"; exit 2; }
done
# A model folder as `striker serve` expects it: config.json beside the tokenizer files.
MODEL_DIR=$(mktemp -d /tmp/striker-flint-dummy.XXXXXX)
cp "$CONFIG" "$MODEL_DIR/config.json"
cp "$TOKENIZER"/* "$MODEL_DIR/"
PORT=${STRIKER_SERVE_BENCH_PORT:-8321}
URL=http://127.0.0.1:$PORT
SERVE_ARGS=${STRIKER_SERVE_BENCH_SERVE_ARGS:---max-num-batched-tokens 8192}
DEVICE=${STRIKER_SERVE_BENCH_DEVICE:-cuda}
read -r LONG_IN LONG_OUT <<<"${STRIKER_SERVE_BENCH_LONG:-100000 256}"
read -r CONC_N CONC_C CONC_IN CONC_OUT <<<"${STRIKER_SERVE_BENCH_CONC-128 64 1024 128}"
read -r MT_FIRST MT_TURNS MT_TOKENS MT_OUT <<<"${STRIKER_SERVE_BENCH_MULTI_TURN-32000 3 200 64}"
SERVER_PID=""
rc=0

stop_server() {  # SIGTERM as an orchestrator would; a server that hangs is killed and reported
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null
  for _ in $(seq 1 60); do
    kill -0 "$SERVER_PID" 2>/dev/null || { wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""; return 0; }
    sleep 0.5
  done
  echo "serve bench: striker serve did not exit within 30 s of SIGTERM; killed"
  kill -KILL "$SERVER_PID" 2>/dev/null
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=""
  rc=1
}
trap 'stop_server; rm -rf "$MODEL_DIR"' EXIT

healthy() {
  python3 -c "import sys, urllib.request
try: sys.exit(0 if urllib.request.urlopen('$URL/health', timeout=2).status == 200 else 1)
except Exception: sys.exit(1)"
}

start_server() {  # FORMAT (bf16 | nvfp4); waits up to 180 s for /health = 200
  local quant=()
  [ "$1" = nvfp4 ] && quant=(--quantization nvfp4)
  # shellcheck disable=SC2086
  "$BIN/striker" serve "$MODEL_DIR" --served-model-name flint --load-format dummy --device "$DEVICE" \
    --host 127.0.0.1 --port "$PORT" "${quant[@]}" $SERVE_ARGS >"$LOGS/serve_$1.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 360); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      wait "$SERVER_PID"; echo "serve bench: striker serve ($1) exited with $? before ready:"
      tail -5 "$LOGS/serve_$1.log"; SERVER_PID=""; return 1
    fi
    healthy && { grep -E "KV cache|ready in|GB of random" "$LOGS/serve_$1.log"; return 0; }
    sleep 0.5
  done
  echo "serve bench: striker serve ($1) not ready after 180 s"; tail -5 "$LOGS/serve_$1.log"
  stop_server; return 1
}

run_bench() {  # FORMAT RUN_LABEL SECONDS serve_bench.py-args...
  local fmt=$1 run=$2 limit=$3
  shift 3
  echo "== serve_bench $run ($fmt): $*"
  timeout "$limit" python3 bench/serve_bench.py --base-url "$URL" --model flint --ignore-eos --seed 0 \
    --ready-check-timeout-sec 10 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
    --disable-tqdm --save-result --result-filename "$LOGS/${run}_${fmt}.json" --metadata "run=$run" "weights=$fmt" \
    "$@" 2>&1 | tee "$LOGS/${run}_${fmt}.log"
  local r=${PIPESTATUS[0]}
  if [ "$r" != 0 ]; then echo "serve bench: $run ($fmt) exited with $r (124 = timed out)"; rc=1; fi
  # A run whose requests failed is a failure even if some completed.
  python3 -c "import json, sys; j = json.load(open(sys.argv[1])); sys.exit(1 if j['failed'] else 0)" \
    "$LOGS/${run}_${fmt}.json" 2>/dev/null || { echo "serve bench: $run ($fmt) had failed requests or no result"; rc=1; }
}

run_multi_turn() {  # FORMAT: prints "== multi-turn (FORMAT): turn-2/turn-1 TTFT ratio R" for the summary
  local fmt=$1
  echo "== multi_turn_bench ($fmt): $MT_TURNS turns, first prompt ~$MT_FIRST tokens, $MT_TOKENS more a turn"
  timeout 300 python3 bench/multi_turn_bench.py --base-url "$URL" --model flint --ready-check-timeout-sec 10 \
    --first-turn-tokens "$MT_FIRST" --num-turns "$MT_TURNS" --turn-tokens "$MT_TOKENS" --output-len "$MT_OUT" \
    --save-result "$LOGS/multi_turn_$fmt.json" 2>&1 | tee "$LOGS/multi_turn_$fmt.log"
  local r=${PIPESTATUS[0]}
  if [ "$r" != 0 ]; then echo "serve bench: multi_turn ($fmt) exited with $r (124 = timed out)"; rc=1; return; fi
  python3 -c "import json, sys; j = json.load(open(sys.argv[1]))
print('== multi-turn (%s): TTFT per turn (ms) %s; turn-2/turn-1 TTFT ratio %.4f' % (sys.argv[2],
      ', '.join('%.1f' % t for t in j['mean_ttft_ms_per_turn']), j['ttft_ratio_turn2_turn1']))" \
    "$LOGS/multi_turn_$fmt.json" "$fmt" || rc=1
}

RESULTS=()
for fmt in ${STRIKER_SERVE_BENCH_FORMATS:-bf16 nvfp4}; do
  echo "== striker serve --load-format dummy --device $DEVICE ($fmt) $SERVE_ARGS"
  t0=$(date +%s)
  if ! start_server "$fmt"; then rc=1; continue; fi
  echo "ready after $(( $(date +%s) - t0 )) s"
  run_bench "$fmt" long "${STRIKER_SERVE_BENCH_LONG_LIMIT:-150}" --num-prompts 1 --max-concurrency 1 \
    --random-input-len "$LONG_IN" --random-output-len "$LONG_OUT" --num-warmups "${STRIKER_SERVE_BENCH_WARMUPS:-1}" \
    ${STRIKER_SERVE_BENCH_LONG_ARGS:-}
  RESULTS+=("$LOGS/long_$fmt.json")
  if [ -n "${CONC_N:-}" ]; then
    run_bench "$fmt" "c$CONC_C" 150 --num-prompts "$CONC_N" --max-concurrency "$CONC_C" --random-input-len "$CONC_IN" \
      --random-output-len "$CONC_OUT"
    RESULTS+=("$LOGS/c${CONC_C}_$fmt.json")
  fi
  if [ -n "${MT_FIRST:-}" ]; then run_multi_turn "$fmt"; fi
  stop_server
done

echo
echo "== end-to-end serving (bench/serve_bench.py against striker serve --device $DEVICE, $(basename "$CONFIG"), dummy weights)"
[ "${#RESULTS[@]}" -gt 0 ] && python3 bench/serve_summary.py "${RESULTS[@]}"
echo "project target: decode a single request at 100K faster than vLLM on a GB200 —" \
  "TPOT 2.34 ms BF16 / 1.78 ms NVFP4, ~485 tok/s end to end"
echo "serve bench rc=$rc"
exit $rc
