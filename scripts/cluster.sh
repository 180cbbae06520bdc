#!/usr/bin/env bash
# N striker replicas behind vllm-router (PyPI `vllm-router`, the router vLLM users deploy), on this
# machine. Without a model, each replica serves a random-weight tiny Flint checkpoint on the CPU;
# with --model and --device cuda, replica i runs on GPU i (CUDA_VISIBLE_DEVICES=i).
#
#   scripts/cluster.sh 3                                  # 3 CPU replicas, round_robin, on :8000
#   scripts/cluster.sh 2 --policy kv_aware                # routed on the replicas' KV events
#   scripts/cluster.sh 8 --model /models/flint --device cuda --policy cache_aware
#   scripts/cluster.sh 2 -- --max-num-seqs 64             # flags after -- go to every `striker serve`
#
# Replica i listens on PORT+i (and publishes KV events on KV_PORT+i with kv_aware); the router on
# PORT. It waits until every replica and the router answer /health, prints the URLs, and runs
# until Ctrl-C (or SIGTERM): the router stops first (it finishes the requests it is proxying),
# then every replica drains (--shutdown-timeout) and exits. A second Ctrl-C stops everything now.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
[ $# -ge 1 ] || usage 1
case "$1" in -h|--help) usage 0 ;; esac
N=$1; shift
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "cluster.sh: N must be a positive number of replicas, got '$N'" >&2; exit 1; }
POLICY=round_robin; PORT=${PORT:-8000}; KV_PORT=${KV_PORT:-5557}; MODEL=""; DEVICE=cpu; HOST=127.0.0.1
NAME=${SERVED_MODEL_NAME:-flint}
BIN=${STRIKER_BIN:-build/striker}; SHARED=${STRIKER_SHARED_DIR:-../shared}
EXTRA=(); ROUTER_EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --policy) POLICY=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --kv-port) KV_PORT=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --host) HOST=$2; shift 2 ;;
    --served-model-name) NAME=$2; shift 2 ;;
    --router-arg) ROUTER_EXTRA+=("$2"); shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage 0 ;;
    *) echo "cluster.sh: unknown option '$1' (see --help)" >&2; exit 1 ;;
  esac
done
case "$POLICY" in
  random|round_robin|cache_aware|kv_aware|power_of_two|consistent_hash|sticky_least_loaded) ;;
  *) echo "cluster.sh: unknown --policy '$POLICY'" >&2; exit 1 ;;
esac
[ -x "$BIN" ] || { echo "cluster.sh: no striker binary at $BIN (build first, or set STRIKER_BIN)" >&2; exit 1; }
command -v vllm-router >/dev/null || { echo "cluster.sh: vllm-router not found (pip install -r tests/python/requirements.txt)" >&2; exit 1; }
if [ "$DEVICE" = cuda ] && command -v nvidia-smi >/dev/null; then
  GPUS=$(nvidia-smi -L | wc -l)
  [ "$N" -le "$GPUS" ] || { echo "cluster.sh: $N replicas need $N GPUs, $GPUS visible" >&2; exit 1; }
fi

LOGS=$(mktemp -d /tmp/striker-cluster.XXXXXX)
if [ -z "$MODEL" ]; then
  MODEL=$LOGS/tiny-model
  "$BIN" make-model --config "$SHARED/fixtures/flint-config/config.tiny.json" \
    --tokenizer "$SHARED/fixtures/flint-tokenizer" --out "$MODEL" --seed 0 >/dev/null
fi

PIDS=(); URLS=(); ROUTER_PID=""
stop_all() {
  trap 'echo "cluster.sh: stopping now"; kill -KILL "${PIDS[@]}" $ROUTER_PID 2>/dev/null || true; exit 130' INT TERM
  echo "cluster.sh: stopping the router, then draining ${#PIDS[@]} replica(s)"
  if [ -n "$ROUTER_PID" ]; then kill -TERM "$ROUTER_PID" 2>/dev/null || true; wait "$ROUTER_PID" 2>/dev/null || true; fi
  kill -TERM "${PIDS[@]}" 2>/dev/null || true
  local rc=0
  for p in "${PIDS[@]}"; do wait "$p" || rc=$?; done
  echo "cluster.sh: all stopped (logs in $LOGS)"
  exit "$rc"
}
trap stop_all INT TERM

wait_health() {  # url pid what
  for _ in $(seq 1 1800); do
    if ! kill -0 "$2" 2>/dev/null; then echo "cluster.sh: $3 exited; its log:" >&2; tail -20 "$LOGS/$3.log" >&2; stop_all; fi
    curl -sf -o /dev/null "$1/health" && return 0
    sleep 0.2
  done
  echo "cluster.sh: $3 not healthy after 6 minutes" >&2; stop_all
}

KV_ARGS=()
for i in $(seq 1 "$N"); do
  args=(serve "$MODEL" --host "$HOST" --port $((PORT + i)) --device "$DEVICE" --served-model-name "$NAME")
  if [ "$POLICY" = kv_aware ]; then
    args+=(--kv-events-config "{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:$((KV_PORT + i))\"}")
    KV_ARGS+=(--kv-event-source "http://$HOST:$((PORT + i))=tcp://127.0.0.1:$((KV_PORT + i))")
  fi
  # kv_aware chains blocks by the replicas' own hashes: every replica must hash alike (vLLM's
  # kv_aware setup asks the same: one PYTHONHASHSEED for all workers).
  if [ "$DEVICE" = cuda ]; then
    PYTHONHASHSEED=${PYTHONHASHSEED:-0} CUDA_VISIBLE_DEVICES=$((i - 1)) "$BIN" "${args[@]}" "${EXTRA[@]}" \
      >"$LOGS/replica$i.log" 2>&1 &
  else
    PYTHONHASHSEED=${PYTHONHASHSEED:-0} "$BIN" "${args[@]}" --cpu-threads 1 "${EXTRA[@]}" >"$LOGS/replica$i.log" 2>&1 &
  fi
  PIDS+=($!); URLS+=("http://$HOST:$((PORT + i))")
done
for i in $(seq 1 "$N"); do wait_health "${URLS[$((i - 1))]}" "${PIDS[$((i - 1))]}" "replica$i"; done
[ "$POLICY" = kv_aware ] && KV_ARGS+=(--kv-event-model "$NAME")

vllm-router --host "$HOST" --port "$PORT" --worker-urls "${URLS[@]}" --policy "$POLICY" \
  --health-check-interval-secs 2 --worker-startup-check-interval 1 "${KV_ARGS[@]}" "${ROUTER_EXTRA[@]}" \
  >"$LOGS/router.log" 2>&1 &
ROUTER_PID=$!
wait_health "http://$HOST:$PORT" "$ROUTER_PID" router
echo "cluster.sh: $N replica(s) (${URLS[*]}) behind vllm-router --policy $POLICY at http://$HOST:$PORT/v1 (model '$NAME'); logs in $LOGS; Ctrl-C stops"
wait "$ROUTER_PID" || true
echo "cluster.sh: the router exited; see $LOGS/router.log" >&2
stop_all
