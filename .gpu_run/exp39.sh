#!/usr/bin/env bash
# Session 20: bench throughput --device cuda with the step recorder passing warm-up and device sampling through
# (new) against the old recorder that hid them (STRIKER_AB_OLDREC=1: host sampling of full logits, no warm-up).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
bt() { timeout 120 env "$@" $B/striker bench throughput --config $C --tokenizer $B/flint-tokenizer --device cuda --json $A 2>/dev/null |
  python3 -c "import json,sys; s=sys.stdin.read(); j=json.loads(s[s.index(chr(123)):]); print('%.1f tok/s out, step %.3f ms, ttft %.0f ms, %.1f s' % (j['output_tokens_per_s'], j['mean_decode_step_ms'], j['ttft_median_ms'], j['elapsed_s']))" 2>&1 | tail -1; }
for A in "--num-prompts 64 --input-len 1024 --output-len 128" "--num-prompts 64 --input-len 1024 --output-len 128 --quantization nvfp4" "--num-prompts 1 --input-len 8192 --output-len 128" "--num-prompts 256 --input-len 512 --output-len 64 --quantization nvfp4"; do
  echo "$A"; echo "  old recorder: $(bt STRIKER_AB_OLDREC=1)"; echo "  new recorder: $(bt X=1)"; done
echo "done at ${SECONDS}s"
