#!/usr/bin/env bash
# On the GPU machine: the CUDA backend's teacher-forced log-probabilities against the CPU
# backend (FLINT.md §4 rule, CPU as reference) on random checkpoints of the tiny config and a
# mid-size config (hidden 1024, 9 layers, 64 experts, window 513, 8 q heads / 1 KV head, d 128):
#   prefill     one prefill of 1,500 tokens
#   chunks 7    the same 1,500 tokens in prefill chunks of 7 (chunked prefill over the cache)
#   decode 4    4 sequences of 560 decoded together, one token of each per step (GEMV decode
#               path, <= 8 tokens a step; 560 > the mid window 513, so the window edge is crossed)
#   decode 16   16 sequences of 100 decoded together (the batched GEMM / grouped-MoE path)
#   nvfp4 ...   the same checkpoint after `striker quantize` (NVFP4 GGUF, W4A16): prefill, and
#               decode 4 on the tiny config only (the CPU's NVFP4 decode is the slowest reference run)
# Every case scores >= 1,500 positions. Time: the CPU reference runs dominate (the mid lm_head is
# 151552 x 1024); on 2 loaded cores here the tiny half took ~12 CPU-minutes.
# The CPU side of a decode row is the CPU backend decoding the same sequences (on the CPU it is
# bit-identical to prefilling each one alone: tests/python/test_cpu_perplexity_decode_batch.py).
# One table row per case; a case whose run fails is an ERROR row (exit status 1), never skipped.
#   scripts/gpu_conformance.sh BIN_DIR   (BIN_DIR holds striker, config.tiny.json, flint-tokenizer/)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-gpubin}
WORK=${TMPDIR:-/tmp}/striker-conformance
LOGS=${OUT:-$WORK}
mkdir -p "$WORK" "$LOGS"
export LD_LIBRARY_PATH="$PWD/$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
COMPARE=tests/python/compare_backends.py
# Dry runs without a GPU: STRIKER_CONFORMANCE_DEVICE=cpu STRIKER_CONFORMANCE_SIZES=tiny (CPU vs CPU).
DEVICE=${STRIKER_CONFORMANCE_DEVICE:-cuda}
SIZES=${STRIKER_CONFORMANCE_SIZES:-tiny mid}
TABLE="$LOGS/conformance_table.md"
python3 - "$BIN/config.tiny.json" "$WORK" <<'PY'
import json, random, sys
tiny = json.load(open(sys.argv[1]))
mid = dict(tiny, hidden_size=1024, num_hidden_layers=9, num_attention_heads=8, num_key_value_heads=1,
           head_dim=128, intermediate_size=2048, moe_intermediate_size=256, shared_expert_intermediate_size=256,
           n_routed_experts=64, sliding_window=513, max_position_embeddings=4096,
           layer_types=["sliding_attention"] * 2 + ["full_attention"] + ["sliding_attention"] * 3
                       + ["full_attention"] + ["sliding_attention", "full_attention"])
json.dump(tiny, open(sys.argv[2] + "/tiny.json", "w"))
json.dump(mid, open(sys.argv[2] + "/mid.json", "w"))
random.seed(5)
for name, n in (("prefill", 1500), ("decode4", 4 * 560), ("decode16", 16 * 100)):
    open(f"{sys.argv[2]}/ids.{name}.txt", "w").write(",".join(str(random.randrange(151000)) for _ in range(n)))
PY
python3 -c "import sys; sys.path.insert(0, 'tests/python'); import compare_backends as c; print(c.TABLE_HEADER)" | tee "$TABLE"
status=0

error_row() {  # config mode reason
  echo "| $1 | $2 | - | - | - | - | ERROR: $3 |" | tee -a "$TABLE"
  status=1
}

# ppl OUT.json MODEL IDS_NAME DEVICE ARGS... : one perplexity run; on failure the last stderr line is kept.
ppl() {
  local out=$1 model=$2 ids=$3 device=$4
  shift 4
  "$BIN/striker" perplexity "$model" --ids "$(cat "$WORK/ids.$ids.txt")" --json --top 20 --device "$device" "$@" \
    >"$out" 2>"$out.err"
}

# case_row CONFIG MODE MODEL IDS_NAME CPU_JSON ARGS... : the tested run of one case, compared with the CPU run.
case_row() {
  local config=$1 mode=$2 model=$3 ids=$4 cpu=$5
  shift 5
  local tag="$config.${mode// /_}"
  if [ ! -s "$cpu" ]; then error_row "$config" "$mode" "cpu run failed: $(tail -n1 "$cpu.err" 2>/dev/null)"; return; fi
  local t0=$SECONDS
  if ! ppl "$LOGS/$tag.$DEVICE.json" "$model" "$ids" "$DEVICE" "$@"; then
    error_row "$config" "$mode" "$DEVICE run failed: $(tail -n1 "$LOGS/$tag.$DEVICE.json.err")"
    return
  fi
  local row rc
  row=$(python3 "$COMPARE" "$cpu" "$LOGS/$tag.$DEVICE.json" --table "$config" "$mode ($((SECONDS - t0)) s)" 2>&1)
  rc=$?
  if [[ $row != "|"* ]]; then error_row "$config" "$mode" "compare failed: $(tail -n1 <<<"$row")"; return; fi
  echo "$row" | tee -a "$TABLE"
  [ $rc = 0 ] || status=1
}

for size in $SIZES; do
  model="$WORK/$size"
  if ! "$BIN/striker" make-model --config "$WORK/$size.json" --tokenizer "$BIN/flint-tokenizer" --out "$model" \
      --seed 21 >/dev/null 2>"$LOGS/$size.make.err"; then
    error_row "$size" "all" "make-model failed: $(tail -n1 "$LOGS/$size.make.err")"
    continue
  fi
  gguf="$WORK/$size.nvfp4.gguf"
  "$BIN/striker" quantize "$model" "$gguf" >/dev/null 2>"$LOGS/$size.quantize.err" || rm -f "$gguf"
  # CPU references (threads: all cores).
  ppl "$LOGS/$size.cpu.prefill.json" "$model" prefill cpu --chunk-size 512
  ppl "$LOGS/$size.cpu.decode4.json" "$model" decode4 cpu --decode-batch 4
  ppl "$LOGS/$size.cpu.decode16.json" "$model" decode16 cpu --decode-batch 16
  case_row "$size" "prefill 1500" "$model" prefill "$LOGS/$size.cpu.prefill.json" --chunk-size 1500
  case_row "$size" "chunks 7" "$model" prefill "$LOGS/$size.cpu.prefill.json" --chunk-size 7
  case_row "$size" "decode 4x560" "$model" decode4 "$LOGS/$size.cpu.decode4.json" --decode-batch 4
  case_row "$size" "decode 16x100" "$model" decode16 "$LOGS/$size.cpu.decode16.json" --decode-batch 16
  if [ ! -s "$gguf" ]; then
    error_row "$size" "nvfp4" "quantize failed: $(tail -n1 "$LOGS/$size.quantize.err")"
    continue
  fi
  # GGUF: config and tokenizer from the BF16 directory, as FLINT.md §6 starts it.
  nv=(--hf-config-path "$model" --tokenizer "$model")
  ppl "$LOGS/$size.cpu.nvfp4.prefill.json" "$gguf" prefill cpu --chunk-size 512 "${nv[@]}"
  case_row "$size" "nvfp4 prefill 1500" "$gguf" prefill "$LOGS/$size.cpu.nvfp4.prefill.json" --chunk-size 1500 "${nv[@]}"
  if [ "$size" = tiny ]; then
    ppl "$LOGS/$size.cpu.nvfp4.decode4.json" "$gguf" decode4 cpu --decode-batch 4 "${nv[@]}"
    case_row "$size" "nvfp4 decode 4x560" "$gguf" decode4 "$LOGS/$size.cpu.nvfp4.decode4.json" --decode-batch 4 "${nv[@]}"
  fi
done
echo "table: $TABLE (whole script ${SECONDS} s)"
exit $status
