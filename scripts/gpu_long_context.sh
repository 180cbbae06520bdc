#!/usr/bin/env bash
# Long context on the GPU (called by scripts/gpu.sh; parts picked by STRIKER_LONG_PARTS, default
# "check serve262k"):
#
# check     striker's teacher-forced log-probabilities over 101,000 random ids against the PyTorch
#           reference (tests/python/torch_reference.py), on a random "long" checkpoint: hidden 1024,
#           6 layers (sliding and NoPE full layers), 16 query / 2 KV heads of 128, 64 experts top-6,
#           window 129 (see docs/performance.md: at 513 the one-short control is too weak to trust), and
#           q_norm weights x3 (make-model --q-norm-scale 3) so attention is sharp
#           enough that a wrong key moves the logits. Runs (striker perplexity --device cuda):
#             chunks 8192        all 101,000 ids in prefill chunks of 8,192
#             chunks 3001 to 32K the first 32,768 in chunks of 3,001 (chunk edges off the 16-token blocks)
#             decode after 32K   --decode-batch 1 --decode-prefill 32768: 1,023 decode steps scored
#             decode after 98K   --decode-batch 1 --decode-prefill 98304 (one 98,304-token step): 1,695 steps
#             one 100,000 step   --chunk-size 100000 --score-from 100000: one 100,000-token prefill step,
#                                then the 999 positions after it scored in one chunk
#           The verdict is relative, measured in the same run (tests/python/long_context_check.py): the
#           torch reference's distance to the float64 numpy reference on the first 1,000 positions is
#           the noise floor; every run must stay within 2x of it in every position range (0-513, to 8K,
#           to 16K, to 32K, to 98K, to the end), and two controls - the torch reference with the
#           window one short, and with full layers seeing only the last 4,096 keys - must FAIL it.
#           First a sanity row: the torch reference vs float64 on the tiny config under FLINT.md §4's rule.
# serve262k one 262,000-token request (64 output tokens) to `striker serve --max-model-len 262144` on the
#           full config, dummy weights, BF16 and NVFP4 (scripts/gpu_serve_bench.sh with its knobs): the
#           startup summary (KV cache size and maximum concurrency at 262,144 tokens), TTFT and TPOT.
# Expected time on the H200: check ~4 min (float64 baseline and torch passes ~2, striker runs ~1.5),
# serve262k ~3-4 min (two server starts on the full config, each a ~40 s prefill of 262K tokens).
#   scripts/gpu_long_context.sh BIN_DIR   (BIN_DIR holds striker, config.tiny.json, config.json, flint-tokenizer/)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BIN=${1:-gpubin}
WORK=${TMPDIR:-/tmp}/striker-long-context
LOGS=${OUT:-$WORK}/long_context
mkdir -p "$WORK" "$LOGS"
export LD_LIBRARY_PATH="$PWD/$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PARTS=" ${STRIKER_LONG_PARTS:-check serve262k} "
CHECK=tests/python/long_context_check.py
TOKENIZER=$BIN/flint-tokenizer
[ -f "$TOKENIZER/tokenizer.json" ] || TOKENIZER=../shared/fixtures/flint-tokenizer
TINY=$BIN/config.tiny.json
[ -f "$TINY" ] || TINY=../shared/fixtures/flint-config/config.tiny.json
status=0

if [[ "$PARTS" == *" check "* ]]; then
  t0=$SECONDS
  python3 - "$TINY" "$WORK" <<'PY'
import json, random, sys
tiny = json.load(open(sys.argv[1]))
long = dict(tiny, hidden_size=1024, num_hidden_layers=6, num_attention_heads=16, num_key_value_heads=2,
            head_dim=128, intermediate_size=2048, moe_intermediate_size=256, shared_expert_intermediate_size=256,
            n_routed_experts=64, first_k_dense_replace=1, sliding_window=129, max_position_embeddings=262144,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                         "full_attention", "sliding_attention"])
json.dump(long, open(sys.argv[2] + "/long.json", "w"))
random.seed(16)
ids = [str(random.randrange(151000)) for _ in range(101000)]
for n in (101000, 100000, 33792, 32768):
    open(f"{sys.argv[2]}/ids.{n}.txt", "w").write(",".join(ids[:n]))
PY
  "$BIN/striker" make-model --config "$TINY" --tokenizer "$TOKENIZER" --out "$WORK/tiny" --seed 16 \
    >/dev/null 2>"$LOGS/make_tiny.err" || { echo "ERROR: make-model tiny: $(tail -n1 "$LOGS/make_tiny.err")"; status=1; }
  "$BIN/striker" make-model --config "$WORK/long.json" --tokenizer "$TOKENIZER" --out "$WORK/long" --seed 16 \
    --q-norm-scale 3 >/dev/null 2>"$LOGS/make_long.err" ||
    { echo "ERROR: make-model long: $(tail -n1 "$LOGS/make_long.err")"; status=1; }
  echo "== the torch reference vs float64 on the tiny config (FLINT.md §4 rule)"
  python3 "$CHECK" rule "$WORK/tiny" --positions 500 --device cuda >"$LOGS/rule.log" 2>&1 || status=1
  tail -n 3 "$LOGS/rule.log"

  runs=()
  # striker_run LABEL IDS_COUNT ARGS...: one perplexity run; a failure leaves {"error": last stderr line}.
  striker_run() {
    local label=$1 n=$2 tag
    shift 2
    tag=$(tr -c 'a-zA-Z0-9\n' _ <<<"$label")
    local t=$SECONDS out=$LOGS/$tag.json
    if "$BIN/striker" perplexity "$WORK/long" --ids-file "$WORK/ids.$n.txt" --json --device cuda "$@" \
        >"$out" 2>"$out.err"; then
      echo "$label: $((SECONDS - t)) s"
    else
      python3 -c 'import json, sys; print(json.dumps({"error": sys.argv[1]}))' "$(tail -n1 "$out.err")" >"$out"
      echo "$label: FAILED after $((SECONDS - t)) s: $(tail -n1 "$out.err")"
    fi
    runs+=(--run "$label=$out")
  }
  echo "== striker perplexity --device cuda on the long checkpoint"
  striker_run "chunks 8192" 101000 --chunk-size 8192
  striker_run "chunks 3001 to 32K" 32768 --chunk-size 3001
  striker_run "decode after 32K" 33792 --decode-batch 1 --decode-prefill 32768 --score-from 32768
  striker_run "decode after 98K" 100000 --decode-batch 1 --decode-prefill 98304 --score-from 98304
  striker_run "one 100,000 step" 101000 --chunk-size 100000 --score-from 100000
  echo "== against the torch reference (noise floor: torch vs float64 on positions 0-998)"
  python3 "$CHECK" long "$WORK/long" --ids-file "$WORK/ids.101000.txt" "${runs[@]}" --baseline 1000 \
    --full-window 4096 --device cuda --table "$LOGS/long_context_table.md" || status=1
  echo "(check part: $((SECONDS - t0)) s)"
fi

if [[ "$PARTS" == *" serve262k "* ]]; then
  echo "== one 262,000-token request to striker serve --max-model-len 262144 (full config, dummy weights)"
  STRIKER_SERVE_BENCH_DIR=serve_262k STRIKER_SERVE_BENCH_LONG="262000 64" STRIKER_SERVE_BENCH_CONC="" STRIKER_SERVE_BENCH_MULTI_TURN="" \
    STRIKER_SERVE_BENCH_WARMUPS=0 STRIKER_SERVE_BENCH_LONG_LIMIT=400 \
    STRIKER_SERVE_BENCH_SERVE_ARGS="--max-model-len 262144 --max-num-batched-tokens 8192" \
    bash scripts/gpu_serve_bench.sh "$BIN" >"$LOGS/serve_262k.log" 2>&1 || status=1
  grep -E "^(\||== |striker serve:|  KV cache|  ready in|ready after)|[Ee]rror|serve bench" "$LOGS/serve_262k.log"
fi
echo "long context rc=$status"
exit $status
