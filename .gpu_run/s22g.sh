#!/usr/bin/env bash
# Session 22, run 7: a prompt-logprobs request's time by prompt_logprobs (.gpu_run/s22g_probe.py).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}; mkdir -p $L
timeout 240 python3 .gpu_run/s22g_probe.py $B/striker shared/fixtures/toolcall-model $L/probe_serve.log; echo "probe rc=$? at ${SECONDS}s"
grep -iE 'error|warn' $L/probe_serve.log | head -5
