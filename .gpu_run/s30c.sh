#!/usr/bin/env bash
# Session 30 run 3 (run 2's payload with both bench binaries rebuilt to take `batched-moe T...`): the 64-row tiles
# (T = 683..1023 NVFP4 steps) of the register-fragment kernels, ar vs regs — regs' TM 64 gate/up takes 206 registers
# (2 CTAs per SM) against ar's 168 (3), so they may lose there; T = 64 again as the control of run 2.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
nvidia-smi --query-gpu=name --format=csv,noheader
for v in ar regs ar regs; do
  bin=$B/bench_cuda_kernels; [ $v != regs ] && bin=$B/bench_$v
  timeout 50 $bin batched-moe 700 1000 64 2>&1 | grep -E "nvfp4 moe grouped T=[0-9]+ (gate|down|all)|failed" | cut -c1-100 | sed "s/^/$v /"
  echo "$v done at ${SECONDS}s"
done
