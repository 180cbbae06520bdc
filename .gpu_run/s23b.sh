#!/usr/bin/env bash
# Session 23, run 2 (prepared; ship with STRIKER_SHIP_KERNEL_TESTS=0): the server suites on --device cuda (now with
# /v1/responses and /v1/messages), then the prompt-logprobs probe of session 22 (run 8: prompt_logprobs 5 on a
# 3,890-token prompt took 99-105 ms, ~70 ms of it JSON; predicted now ~45-55 ms with the JSON written as text).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}; mkdir -p $L
timeout 420 bash scripts/gpu_server_tests.sh $B > $L/server.log 2>&1; echo "server suites rc=$? at ${SECONDS}s"
tail -4 $L/server.log
timeout 150 python3 .gpu_run/s22g_probe.py $B/striker shared/fixtures/toolcall-model $L/probe_serve.log; echo "probe rc=$? at ${SECONDS}s"
