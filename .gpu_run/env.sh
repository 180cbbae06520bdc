# Sourced by the .gpu_run scripts (from the unpacked payload's root): the binaries, their libraries, the output
# folder, the full-size config, and which card this is.
set -uo pipefail
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
C=$B/config.json
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
