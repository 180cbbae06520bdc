#!/usr/bin/env bash
# Builds striker, makes a small random-weight Flint checkpoint (tiny config), and serves it
# on the CPU. Ctrl-C stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD=${BUILD_DIR:-build}
SHARED=${STRIKER_SHARED_DIR:-../shared}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j"$(nproc)" --target striker
MODEL=${MODEL_DIR:-$BUILD/tiny-model}
if [ ! -f "$MODEL/model.safetensors.index.json" ]; then
  "$BUILD/striker" make-model --config "$SHARED/fixtures/flint-config/config.tiny.json" \
    --tokenizer "$SHARED/fixtures/flint-tokenizer" --out "$MODEL" --seed 0
fi
exec "$BUILD/striker" serve "$MODEL" --device cpu --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}" \
  --enable-auto-tool-choice --tool-call-parser glm47 --reasoning-parser glm47 \
  --exclude-tools-when-tool-choice-none
