#!/usr/bin/env bash
# On the GPU machine: the CUDA backend's teacher-forced log-probabilities against the CPU
# backend (FLINT.md §4 rule, CPU as reference) on random checkpoints of the tiny config and a
# mid-size config (hidden 1024, 9 layers, 64 experts, window 513), 1,500-token sequences, in one
# prefill and in chunks of 7 (chunked prefill over the cache).
#   scripts/gpu_conformance.sh BIN_DIR   (BIN_DIR holds striker, config.tiny.json, flint-tokenizer/)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-gpubin}
WORK=${TMPDIR:-/tmp}/striker-conformance
LOGS=${OUT:-$WORK}
mkdir -p "$WORK" "$LOGS"
export LD_LIBRARY_PATH="$PWD/$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 - "$BIN/config.tiny.json" "$WORK" <<'PY'
import json, sys
tiny = json.load(open(sys.argv[1]))
mid = dict(tiny, hidden_size=1024, num_hidden_layers=9, num_attention_heads=8, num_key_value_heads=1,
           head_dim=128, intermediate_size=2048, moe_intermediate_size=256, shared_expert_intermediate_size=256,
           n_routed_experts=64, sliding_window=513, max_position_embeddings=4096,
           layer_types=["sliding_attention"] * 2 + ["full_attention"] + ["sliding_attention"] * 3
                       + ["full_attention"] + ["sliding_attention", "full_attention"])
json.dump(tiny, open(sys.argv[2] + "/tiny.json", "w"))
json.dump(mid, open(sys.argv[2] + "/mid.json", "w"))
import random
random.seed(5)
open(sys.argv[2] + "/ids.txt", "w").write(",".join(str(random.randrange(151000)) for _ in range(1500)))
PY
status=0
for size in tiny mid; do
  "$BIN/striker" make-model --config "$WORK/$size.json" --tokenizer "$BIN/flint-tokenizer" --out "$WORK/$size" --seed 21 \
    >/dev/null || { echo "$size: make-model failed"; status=1; continue; }
  ids=$(cat "$WORK/ids.txt")
  "$BIN/striker" perplexity "$WORK/$size" --ids "$ids" --json --top 20 --device cpu --chunk-size 512 \
    >"$LOGS/$size.cpu.json" || { echo "$size: cpu run failed"; status=1; continue; }
  for chunk in 1500 7; do
    "$BIN/striker" perplexity "$WORK/$size" --ids "$ids" --json --top 20 --device cuda --chunk-size $chunk \
      >"$LOGS/$size.cuda.$chunk.json" || { echo "$size: cuda run (chunk $chunk) failed"; status=1; continue; }
    python3 tests/python/compare_backends.py "$LOGS/$size.cpu.json" "$LOGS/$size.cuda.$chunk.json" \
      "$size cuda (chunk $chunk) vs cpu" || status=1
  done
done
exit $status
