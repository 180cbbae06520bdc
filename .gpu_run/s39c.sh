#!/usr/bin/env bash
# Session 39, one call (payload as s39a.sh): base (main 8d22d2c) vs all-live MoE (bench latency --graphs, 50 steps,
# device ms), three rounds; both arms' CUPTI step timelines at 8 x 8K and 1 x 8K; then every GPU kernel test beside
# scripts/gpu_conformance.sh on the new build; then, while time is left, ncu instruction counts of the per-slot MoE
# kernels of one middle layer at 8 x 8K, both arms.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc .gpuwork/striker_base.xz > $B/striker_base && chmod +x $B/striker_base
C=$B/config.json
for rep in 1 2 3; do
  for cb in "8192 8" "8192 1" "100000 1" "1024 2" "1024 4" "1024 16"; do set -- $cb
    echo -n "ctx$1 b$2:"
    for bin in striker_base striker; do
      r=$(timeout 90 $B/$bin bench latency --config $C --quantization nvfp4 --graphs --context $1 --batch $2 --steps 50 --warmup 3 2>&1)
      echo -n " $bin $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -m1 -i error)"
    done; echo
  done
done
echo "table done at ${SECONDS}s"
mkdir -p gpubin_base && for f in $B/*; do ln -sfn "$PWD/$f" gpubin_base/; done && rm gpubin_base/striker && cp $B/striker_base gpubin_base/striker
for arm in base new; do
  d=$B; [ $arm = base ] && d=gpubin_base
  OUT=/tmp/tl_$arm STRIKER_PROFILE_CONTEXTS="" STRIKER_PROFILE_TIMELINE="nvfp4:8192:8 nvfp4:8192:1" timeout 100 \
    bash scripts/gpu_profile.sh $d > /tmp/tl_$arm.txt 2>&1
  echo "timeline $arm rc=$? at ${SECONDS}s"
done
for b in 8 1; do
  python3 scripts/step_timeline.py /tmp/tl_base/timeline_nvfp4_8192_b$b.csv --compare /tmp/tl_new/timeline_nvfp4_8192_b$b.csv \
    "NVFP4 8K batch $b: base (A) vs all-live (B)" > $OUT/compare_b$b.txt 2>&1; head -24 $OUT/compare_b$b.txt
done
( timeout 330 $B/test_cuda_kernels > $OUT/kernel_tests.txt 2>&1; echo "kernel tests rc=$? at ${SECONDS}s" ) &
( OUT=/tmp/conf timeout 330 bash scripts/gpu_conformance.sh $B > $OUT/conformance.txt 2>&1; echo "conformance rc=$? at ${SECONDS}s" ) &
wait
grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $OUT/kernel_tests.txt | head -20
grep "^\[ RUN" $OUT/kernel_tests.txt | tail -1
tail -14 $OUT/conformance.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
for k in nvfp4_moe_gate_up_kernel nvfp4_moe_down; do
  for bin in striker_base striker; do
    [ $SECONDS -gt 555 ] && break 2
    timeout 40 "$NCU" --clock-control none --cache-control none -k "regex:$k" --launch-skip 24 --launch-count 1 \
      --metrics $M $B/$bin bench latency --config $C --quantization nvfp4 --context 8192 --batch 8 --steps 1 \
      --warmup 0 > $OUT/ncu_${k}_$bin.txt 2>&1
    echo "ncu $k $bin rc=$?: $(grep -E '^\s+(gpu__time|smsp__inst|smsp__issue|launch__reg)' $OUT/ncu_${k}_$bin.txt | awk '{print $1"="$NF}' | tr '\n' ' ')"
  done
done
cp /tmp/tl_base/*.csv $OUT/ 2>/dev/null; for f in /tmp/tl_new/*.csv; do cp $f $OUT/new_$(basename $f); done
echo "all done at ${SECONDS}s"
