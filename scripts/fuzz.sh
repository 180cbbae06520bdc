#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang + ASan/UBSan in their own build dir and runs
# each for FUZZ_SECONDS (default 60), all at once. Fails on any crash,
# sanitizer report or uncaught exception; the reproducer is left in $FUZZ_BUILD/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
CXX_FUZZ=${FUZZ_CXX:-clang++}
if ! command -v "$CXX_FUZZ" >/dev/null; then
  echo "fuzz.sh: $CXX_FUZZ not found (install clang)" >&2
  exit 1
fi

cmake -S . -B "$FUZZ_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$CXX_FUZZ" \
  -DCMAKE_C_COMPILER="${FUZZ_CC:-clang}" -DSTRIKER_FUZZ=ON -DSTRIKER_CUDA=OFF -DSTRIKER_TESTS=OFF >/dev/null
FUZZERS=()
for src in fuzz/fuzz_*.cpp; do FUZZERS+=("$(basename "$src" .cpp)"); done
cmake --build "$FUZZ_BUILD" -j"$(nproc)" --target "${FUZZERS[@]}"

# Seed corpora: small valid inputs the mutator can start from.
python3 - "$FUZZ_BUILD/seeds" <<'PY'
import json, os, struct, sys
root = sys.argv[1]

def st(header, data=b""):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data

def put(target, name, blob):
    os.makedirs(os.path.join(root, target), exist_ok=True)
    with open(os.path.join(root, target, name), "wb") as f:
        f.write(blob if isinstance(blob, bytes) else blob.encode())

put("fuzz_safetensors", "empty", st({}))
put("fuzz_safetensors", "one", st({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}, bytes(8)))
put("fuzz_safetensors", "meta", st({"__metadata__": {"format": "pt"},
                                    "b": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
                                    "a": {"dtype": "U8", "shape": [3], "data_offsets": [4, 7]},
                                    "z": {"dtype": "F4", "shape": [0, 2], "data_offsets": [7, 7]}}, bytes(7)))
put("fuzz_safetensors", "reversed", st({"w": {"dtype": "I64", "shape": [1], "data_offsets": [8, 0]}}, bytes(8)))
put("fuzz_safetensors_index", "index", json.dumps({"metadata": {"total_size": 8},
    "weight_map": {"a.weight": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
put("fuzz_safetensors_index", "bad", '{"weight_map": {"a": "../x"}}')
with open("tests/cpp/loaders/data/small.gguf", "rb") as f:
    put("fuzz_gguf", "small", f.read())
header = b"GGUF" + struct.pack("<IQQ", 3, 1, 1)
kv = struct.pack("<Q", 17) + b"general.alignment" + struct.pack("<II", 4, 32)
ti = struct.pack("<Q", 1) + b"w" + struct.pack("<IQQIQ", 2, 64, 2, 40, 0)
blob = header + kv + ti
put("fuzz_gguf", "nvfp4", blob + bytes(-len(blob) % 32) + bytes(72))
PY

mkdir -p "$FUZZ_BUILD/artifacts"
run_one() {
  local name=$1 corpus="$FUZZ_BUILD/corpus/$1"
  mkdir -p "$corpus" "$FUZZ_BUILD/seeds/$name"
  local dict=()
  case $name in
    fuzz_safetensors*) dict=(-dict=fuzz/safetensors.dict) ;;
    fuzz_gguf*) dict=(-dict=fuzz/gguf.dict) ;;
  esac
  "$FUZZ_BUILD/fuzz/$name" "$corpus" "$FUZZ_BUILD/seeds/$name" "${dict[@]}" -max_total_time="$SECONDS_EACH" \
    -max_len=8192 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$FUZZ_BUILD/artifacts/$name-" >"$FUZZ_BUILD/$name.log" 2>&1
}
# All targets run at once so the wall time stays FUZZ_SECONDS however few cores there are.
pids=()
for name in "${FUZZERS[@]}"; do
  run_one "$name" &
  pids+=("$!")
done
status=0
failed=()
for i in "${!FUZZERS[@]}"; do
  if ! wait "${pids[$i]}"; then
    failed+=("${FUZZERS[$i]}")
    status=1
  fi
done
for name in "${FUZZERS[@]}"; do
  echo "$name: $(grep -E '^stat::number_of_executed_units' "$FUZZ_BUILD/$name.log" | awk '{print $2}') runs," \
       "$(ls "$FUZZ_BUILD/corpus/$name" | wc -l) corpus files"
done
for name in "${failed[@]}"; do
  echo "FUZZ FAILURE: $name (log $FUZZ_BUILD/$name.log, reproducer in $FUZZ_BUILD/artifacts/)"
  tail -n 30 "$FUZZ_BUILD/$name.log"
done
exit "$status"
