#!/usr/bin/env bash
# Session 21, run 10: what a served request asking for logprobs costs per token (host-side log-softmax of each row):
# NVFP4, one request 100K -> 256, generation_config, without and with "logprobs": 5.
set -uo pipefail
cd "$(dirname "$0")/.."
bash .gpu_run/serve_long.sh "plain=" 'logprobs=--extra-body {"logprobs":5}'
