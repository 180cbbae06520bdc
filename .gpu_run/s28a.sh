#!/usr/bin/env bash
# Session 28 run 1 (kernel payload, STRIKER_SHIP_SERVER=0) of the work waiting in .gpu_run/s28.patch (`git apply` it
# onto main and build; gpubin/*_base are main's binaries without it; the patch goes once it is merged or dropped):
# (1) the GPU tests of the code this session touched: the grouped MoE kernels' NVFP4 register fetch-ahead
#     (CudaMoeGrouped*) and async scheduling's launch/collect split, never run on a GPU yet (CudaSampling.*);
# (2) bench_cuda_kernels batched-moe, main vs fetch-ahead (prediction, docs/performance.md 27th session:
#     grouped NVFP4 >= 2x faster at T = 64; T = 8 grouped gate/up ~12-15 us vs per-slot 35.2);
# (3) bench latency --batch 16/64/256 NVFP4, main vs fetch-ahead, BF16 b64 as control (64 seqs: 23.75 -> 15-17 ms);
# (4) bench latency --batch 2/4/8 at 8K NVFP4: this branch vs gpubin/striker_b8g, the same with the NVFP4 MoE of
#     2-8 tokens on the grouped kernels (moe_batched) instead of the per-slot ones (a question, not on the branch);
# (5) bench throughput with --no-async-scheduling and with the new default (async on with --device cuda).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
LIMIT=${S28_LIMIT:-430}  # seconds the whole run may take (the parts below stop starting new rows before it)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout $(( LIMIT / 3 )) $B/test_cuda_kernels --gtest_filter='CudaMoeGrouped*:CudaSampling.*:CudaEmbedding.*:CudaLogprob*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[==========\]|Failure|FAILED|rror" | head -30
echo "kernel tests done at ${SECONDS}s"
for v in base new; do
  bin=$B/bench_cuda_kernels; [ $v = base ] && bin=$B/bench_base
  timeout 75 $bin batched-moe 2>&1 | grep -E "grouped T=|per-slot T=8|failed|rror" | sed "s/^/$v /"
  echo "batched-moe $v done at ${SECONDS}s"
done
lat() {  # VARIANT (base: main | new: this branch | b8g: + NVFP4 MoE of 2-8 tokens on the grouped kernels) FORMAT BATCH CONTEXT
  [ $SECONDS -gt $(( LIMIT - 100 )) ] && return
  local bin=$B/striker q=""; [ "$1" = base ] && bin=$B/striker_base; [ "$1" = b8g ] && bin=$B/striker_b8g
  [ "$2" = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $bin bench latency --config $C $q --graphs --context $4 --batch $3 --steps 30 --warmup 3 2>&1)
  echo "$1 $2 b$3 ctx$4: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') | $(echo "$r" | grep -oE '[0-9.]+% of the 4.6') | $(echo "$r" | grep -oE 'kernels per step: [0-9]+')$(echo "$r" | grep -m1 -i error)"
}
for v in base new; do lat $v nvfp4 64 1024; done
for b in 8 4 2; do for v in new b8g; do lat $v nvfp4 $b 8192; done; done
for b in 16 256; do for v in base new; do lat $v nvfp4 $b 1024; done; done
for v in base new; do lat $v bf16 64 1024; done
echo "latency done at ${SECONDS}s"
for q in "" "--quantization nvfp4"; do
  for a in "--no-async-scheduling" ""; do
    [ $SECONDS -gt $(( LIMIT - 50 )) ] && break
    echo "throughput ${q:-bf16} ${a:-default}: $(timeout 60 $B/striker bench throughput --config $C --tokenizer $B/flint-tokenizer --device cuda \
      --num-prompts 64 --input-len 1024 --output-len 128 $q $a 2>&1 | grep -E 'elapsed|decode steps|async|rror' | tr '\n' ' ')"
  done
done
echo "all done at ${SECONDS}s"
