#!/usr/bin/env bash
# Builds striker and runs every test (C++ unit tests, Python reference/parity/server tests,
# fuzz smoke runs). This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD=${BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j"$(nproc)"
if [ -f scripts/fuzz.sh ]; then bash scripts/fuzz.sh; fi
cd "$BUILD" && ctest --output-on-failure -j"$(nproc)"
