#!/usr/bin/env bash
# Development helper: copies this checkout (without build/ and .git) plus the GPU binaries built
# here into /work/main/.gpuwork/, the folder the device tool carries to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-/work/main/.gpuwork}
rm -rf "$DEST" && mkdir -p "$DEST"
tar --exclude=./build --exclude=./.git --exclude=./.gpuwork -cf - . | tar -xf - -C "$DEST"
mkdir -p "$DEST/gpubin"
for b in build/tests/cuda/test_cuda_kernels build/tests/cuda/bench_cuda_kernels build/striker; do
  if [ -x "$b" ]; then cp "$b" "$DEST/gpubin/" && strip --strip-debug "$DEST/gpubin/$(basename "$b")"; fi
done
# Shared libraries only Debian has (the GPU machine runs Ubuntu 24.04): carried beside the
# binaries; gpu.sh puts gpubin/lib on LD_LIBRARY_PATH.
if [ -x "$DEST/gpubin/striker" ]; then
  mkdir -p "$DEST/gpubin/lib"
  ldd "$DEST/gpubin/striker" | awk '/=> \// {print $3}' | grep -E 'httplib|libicu|brotli' |
    while read -r lib; do cp -L "$lib" "$DEST/gpubin/lib/"; done
fi
# The full-size model shape for `striker bench latency` (shared/ does not travel).
SHARED=${STRIKER_SHARED_DIR:-../shared}
[ -d "$SHARED" ] || SHARED=/work/shared
cp "$SHARED/fixtures/flint-config/config.json" "$DEST/gpubin/config.json"
# ... and what scripts/gpu_conformance.sh needs to make random checkpoints there.
cp "$SHARED/fixtures/flint-config/config.tiny.json" "$DEST/gpubin/config.tiny.json"
cp -r "$SHARED/fixtures/flint-tokenizer" "$DEST/gpubin/flint-tokenizer"
du -sh "$DEST"
