#!/usr/bin/env bash
# Session 25, run 2 (ship with STRIKER_SHIP_KERNEL_TESTS=bench): the persistent-chain probe again with every
# consumer warp busy (half rows in o_proj, gate and up rows on separate warps, two FMA chains per dot), the
# per-op split into wait (counter + input) and work, and the schedule without the dots (L2 and DRAM); then
# session 23's prepared run 2 (server suites on --device cuda, the prompt-logprobs probe).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
timeout 150 $B/bench_cuda_kernels persistent-chain 2>&1 | tail -20; echo "chain rc=${PIPESTATUS[0]} at ${SECONDS}s"
bash .gpu_run/s23b.sh
echo "done at ${SECONDS}s"
