#!/usr/bin/env bash
# Development helper: packs this checkout (without build/ and .git), the GPU binaries built here, the
# fixtures and Python wheels the GPU tests need into one xz archive, /work/main/.gpuwork/payload.tar.xz —
# the folder the device tool carries to the GPU machine (64 MiB limit: unpacked it is ~110 MB, mostly
# ICU data and the toolcall model). On the GPU machine: `cd .gpuwork && tar xJf payload.tar.xz && bash scripts/gpu.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-/work/main/.gpuwork}
DEST=$(mktemp -d /tmp/striker-ship.XXXXXX)
trap 'rm -rf "$DEST"' EXIT
# STRIKER_SHIP_SOURCES=0 leaves the sources the GPU machine never builds (src, docs, C++/CUDA tests) out of
# the archive: the device tool carries the working tree beside it anyway, and the two share 64 MiB.
EXCLUDES=(--exclude='./build*' --exclude=./.git --exclude='./.gpuwork*')
[ "${STRIKER_SHIP_SOURCES:-1}" = 0 ] && EXCLUDES+=(--exclude=./src --exclude=./docs --exclude=./tests/cpp --exclude=./tests/cuda)
tar "${EXCLUDES[@]}" -cf - . | tar -xf - -C "$DEST"
mkdir -p "$DEST/gpubin"
BUILD=${STRIKER_SHIP_BUILD:-build}  # the CUDA build folder whose binaries travel
# STRIKER_SHIP_KERNEL_TESTS=0 leaves the kernel test and bench binaries out (~5.5 MB packed): with the server
# suites' payload (below) everything together no longer fits the 64 MiB transfer.
# STRIKER_SHIP_KERNEL_TESTS=bench: the bench binary only (fits beside the server suites' payload).
BINS=("$BUILD/striker")
[ "${STRIKER_SHIP_STRIP:-debug}" = all ] && STRIKER_SHIP_STRIP_ARG=--strip-all
case "${STRIKER_SHIP_KERNEL_TESTS:-1}" in
  1) BINS+=("$BUILD/tests/cuda/test_cuda_kernels" "$BUILD/tests/cuda/bench_cuda_kernels") ;;
  bench) BINS+=("$BUILD/tests/cuda/bench_cuda_kernels") ;;
esac
for b in "${BINS[@]}"; do
  # STRIKER_SHIP_STRIP=all also drops the symbol tables (no names in a backtrace; a few MB less).
  if [ -x "$b" ]; then cp "$b" "$DEST/gpubin/" && strip "${STRIKER_SHIP_STRIP_ARG:---strip-debug}" "$DEST/gpubin/$(basename "$b")"; fi
done
# The step-timeline injection library (scripts/gpu_profile.sh STRIKER_PROFILE_TIMELINE) and the
# CUPTI it links (carried: its soname must match this CUDA 13 build).
# STRIKER_SHIP_TRACE=0 leaves them out (~1.5 MB packed) where a payload must shrink.
TRACE="$BUILD/tests/cuda/libstriker_kernel_trace.so"
if [ -f "$TRACE" ] && [ "${STRIKER_SHIP_TRACE:-1}" = 1 ]; then
  cp "$TRACE" "$DEST/gpubin/"
  mkdir -p "$DEST/gpubin/lib"
  cupti=$(ldd "$TRACE" | awk '/libcupti/ {print $3}')
  [ -n "$cupti" ] && cp -L "$cupti" "$DEST/gpubin/lib/"
fi
# Shared libraries only Debian has (the GPU machine runs Ubuntu 24.04): carried beside the
# binaries; gpu.sh puts gpubin/lib on LD_LIBRARY_PATH.
if [ -x "$DEST/gpubin/striker" ]; then
  mkdir -p "$DEST/gpubin/lib"
  # Everything the binary links except glibc itself, the C++ runtime (the GPU machine's is newer)
  # and CUDA's libraries (the GPU machine has CUDA 13): libcurl alone pulls in ~25 Debian sonames
  # (libldap-2.5, librtmp, ...) that Ubuntu 24.04 names differently or lacks.
  ldd "$DEST/gpubin/striker" | awk '/=> \// {print $3}' |
    grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s|libcublas|libcublasLt|libcudart)\.so' |
    while read -r lib; do cp -L "$lib" "$DEST/gpubin/lib/"; done
fi
# The full-size model shape for `striker bench latency` (shared/ does not travel).
SHARED=${STRIKER_SHARED_DIR:-../shared}
[ -d "$SHARED" ] || SHARED=/work/shared
cp "$SHARED/fixtures/flint-config/config.json" "$DEST/gpubin/config.json"
# ... and what scripts/gpu_conformance.sh needs to make random checkpoints there.
cp "$SHARED/fixtures/flint-config/config.tiny.json" "$DEST/gpubin/config.tiny.json"
# (a link to the copy under shared/ below: the tokenizer travels once)
ln -s ../shared/fixtures/flint-tokenizer "$DEST/gpubin/flint-tokenizer"
# The server's pytest suites (scripts/gpu_server_tests.sh) read fixtures from ./shared there.
# STRIKER_SHIP_SERVER=0 leaves the server suites' payload out (the toolcall model and the wheels,
# ~55 MB of the 64 MiB transfer) for runs of kernel tests and benchmarks only.
SERVER=${STRIKER_SHIP_SERVER:-1}
mkdir -p "$DEST/shared/fixtures"
FIXTURES="flint-config flint-tokenizer"
[ "$SERVER" = 1 ] && FIXTURES="$FIXTURES toolcall-model"
for f in $FIXTURES; do cp -r "$SHARED/fixtures/$f" "$DEST/shared/fixtures/"; done
# Wheels for those suites (openai, anthropic, pytest, requests, pyyaml, jsonschema and their dependencies for Python 3.12),
# fetched once with `pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64
# -d $STRIKER_GPU_WHEELS openai anthropic pytest requests pyyaml jsonschema`, and gguf alone (`pip download --no-deps ...
# gguf`: gpu_server_tests.sh installs it without numpy, which the GPU machine has).
WHEELS=${STRIKER_GPU_WHEELS:-/work/gpuwheels}
if [ "$SERVER" = 1 ]; then
  # Without them the server suites fail on the GPU machine with import errors only (session 41 lost a run so).
  if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    echo "ship_gpu.sh: no wheels in $WHEELS for the server suites: fetch them as above, or set STRIKER_SHIP_SERVER=0" >&2
    exit 1
  fi
  mkdir -p "$DEST/.whl" && cp "$WHEELS"/*.whl "$DEST/.whl/"
fi
du -sh "$DEST"
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
# xz -9: with the server suites the payload must stay under the transfer's 64 MiB together with the working tree.
tar -C "$DEST" -cf - . | xz -T2 -9 >"$OUTDIR/payload.tar.xz"
ls -la "$OUTDIR/payload.tar.xz"
