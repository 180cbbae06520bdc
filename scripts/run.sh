#!/usr/bin/env bash
# Builds striker and serves the small *trained* demo model (../shared/fixtures/toolcall-model: it
# answers weather/time questions with reasoning and tool calls) on the CPU, port 8000, with the
# glm47 tool-call and reasoning parsers on. Extra arguments go to `striker serve`:
#   bash scripts/run.sh --load-format dummy     # the same model shape with random weights
# MODEL_DIR serves another model, STRIKER_BIN=path/to/striker skips installing and building;
# Ctrl-C stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
SHARED=${STRIKER_SHARED_DIR:-../shared}
if [ -z "${STRIKER_BIN:-}" ]; then
  bash scripts/install-deps.sh
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$BUILD" -j"$(nproc)" --target striker
fi
MODEL=${MODEL_DIR:-$SHARED/fixtures/toolcall-model}
exec "${STRIKER_BIN:-$BUILD/striker}" serve "$MODEL" --served-model-name "${SERVED_NAME:-toolcall}" --device "${DEVICE:-cpu}" \
  --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}" \
  --enable-auto-tool-choice --tool-call-parser glm47 --reasoning-parser glm47 "$@"
