#!/usr/bin/env bash
# Times the batch-1 decode step with every decode-kernel variant under measurement on, with each one
# off alone, and with all of them off (src/backends/cuda/decode_tweaks.h; `striker bench latency
# --disable-tweak NAME`), for BF16 and NVFP4 dummy weights, and prints one table:
#   weights | context | tweaks off | ms/step (wall) | device ms | fraction of the 4.1 TB/s roofline
# so each variant's effect on the whole step is measured alone (docs/performance.md).
# Knobs: STRIKER_AB_FORMATS ("bf16 nvfp4"), STRIKER_AB_CONTEXTS ("100000 8192"), STRIKER_AB_STEPS (50).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BIN=${1:?usage: gpu_decode_ab.sh BIN_DIR}
LOGS=${OUT:-/tmp/striker-gpu}
mkdir -p "$LOGS"
CONFIG=${STRIKER_GPU_CONFIG:-$BIN/config.json}
[ -f "$CONFIG" ] || CONFIG=../shared/fixtures/flint-config/config.json
mapfile -t TWEAKS < <(grep -oE '^ *\{"[a-z0-9_]+", &DecodeTweaks::' src/backends/cuda/decode_tweaks.h |
  sed -E 's/^ *\{"([a-z0-9_]+)".*/\1/')
ALL=$(IFS=,; echo "${TWEAKS[*]}")
VARIANTS=("")
for t in "${TWEAKS[@]}"; do VARIANTS+=("$t"); done
[ "${#TWEAKS[@]}" -gt 1 ] && VARIANTS+=("$ALL")
LOG="$LOGS/decode_ab.log"
: >"$LOG"
rc=0
printf '| weights | context | tweaks off | ms/step | device ms | of roofline |\n|---|---:|---|---:|---:|---:|\n' \
  >"$LOGS/decode_ab_table.md"
for fmt in ${STRIKER_AB_FORMATS:-bf16 nvfp4}; do
  qargs=""
  [ "$fmt" = nvfp4 ] && qargs="--quantization nvfp4"
  for ctx in ${STRIKER_AB_CONTEXTS:-100000 8192}; do
    for off in "${VARIANTS[@]}"; do
      args="--context=$ctx --steps=${STRIKER_AB_STEPS:-50} $qargs"
      [ -n "$off" ] && args="$args --disable-tweak $off"
      echo "== striker bench latency $args" >>"$LOG"
      # shellcheck disable=SC2086
      out=$(timeout 120 "$BIN/striker" bench latency --config "$CONFIG" $args 2>&1)
      r=$?
      echo "$out" >>"$LOG"
      if [ $r != 0 ]; then
        rc=$r
        printf '| %s | %s | %s | error rc=%s | | |\n' "$fmt" "$ctx" "${off:-none}" "$r" >>"$LOGS/decode_ab_table.md"
        continue
      fi
      wall=$(sed -nE 's/.*ms\/step: median ([0-9.]+) wall \(([0-9.]+) device\).*/\1/p' <<<"$out")
      dev=$(sed -nE 's/.*ms\/step: median ([0-9.]+) wall \(([0-9.]+) device\).*/\2/p' <<<"$out")
      frac=$(sed -nE 's/.* = ([0-9.]+%) of the 4.1 TB\/s.*/\1/p' <<<"$out")
      printf '| %s | %s | %s | %s | %s | %s |\n' "$fmt" "$ctx" "${off:-none}" "$wall" "$dev" "$frac" \
        >>"$LOGS/decode_ab_table.md"
    done
  done
done
cat "$LOGS/decode_ab_table.md"
exit $rc
