#!/usr/bin/env bash
# Session 41 run 4: F = the landed form (the cluster combine on NVFP4 one-token steps; the payload's own
# build; main's binary does not fit beside the server payload): bench latency --graphs, 50 steps, device
# ms / kernels, two rounds; then the server suites on --device cuda (test_cuda_kernels and bench_cuda_kernels
# left out of the payload: with the server's fixtures and wheels they pass the 64 MiB transfer).
cd "$(dirname "$0")/.."
source .gpu_run/env.sh
cp $B/striker $B/striker_F
C=$B/config.json
run() {  # bin ctx batch [quantization args]
  local bin=$1 ctx=$2 b=$3; shift 3
  r=$(timeout 90 $B/$bin bench latency --config $C "$@" --graphs --context $ctx --batch $b --steps 50 --warmup 3 2>&1)
  echo -n " ${bin#striker_} $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2; do
  for cb in "8192 1" "100000 1"; do set -- $cb
    echo -n "nvfp4 ctx$1 b$2:"; for bin in striker_F; do run $bin $1 $2 --quantization nvfp4; done; echo
  done
  echo -n "bf16 ctx8192 b1:"; for bin in striker_F; do run $bin 8192 1; done; echo
done
echo "table done at ${SECONDS}s"
bash scripts/gpu_server_tests.sh $B
echo "all done at ${SECONDS}s"
