#!/usr/bin/env bash
# Session 20: the served decode's GPU timeline at 100K (CUPTI kernel trace of striker serve): the step graph, the
# sampling kernels behind it, and the idle gap until the next step's graph.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}; mkdir -p $L
for f in nvfp4 bf16; do
  CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/serve_$f.csv STRIKER_SERVE_BENCH_FORMATS=$f \
    STRIKER_SERVE_BENCH_CONC="" STRIKER_SERVE_BENCH_MULTI_TURN="" timeout 200 bash scripts/gpu_serve_bench.sh $B 2>&1 | grep -E "^\| long"
  sleep 2
  python3 - /tmp/serve_$f.csv $f <<'PY'
import csv, sys, statistics as st
rows = list(csv.DictReader(open(sys.argv[1])))
ks = sorted(((int(r['start_ns']), int(r['end_ns']), r['graph_id'] != '0', r['name'].split('(')[0].split('<')[0].split('::')[-1]) for r in rows))
samp = [i for i, k in enumerate(ks) if k[3] == 'sample_kernel']
out = []
for i in samp:
    j = i - 1
    while j >= 0 and not ks[j][2]: j -= 1          # last graph kernel before the sampling
    if j < 0: continue
    g_end = max(k[1] for k in ks[max(0, j - 50):j + 1] if k[2])
    n = i + 1
    while n < len(ks) and not ks[n][2]: n += 1      # next graph kernel (next step)
    if n >= len(ks): continue
    g0 = j
    while g0 > 0 and ks[g0 - 1][2] and ks[g0][0] - ks[g0 - 1][1] < 20000: g0 -= 1
    cand = [k for k in ks[j + 1:i] if k[3] == 'candidates_kernel']
    out.append(dict(graph=(g_end - ks[g0][0]) / 1e3, tail=(ks[i][1] - g_end) / 1e3,
                    cand=(cand[0][1] - cand[0][0]) / 1e3 if cand else 0, cand_gap=(cand[0][0] - g_end) / 1e3 if cand else 0,
                    sample=(ks[i][1] - ks[i][0]) / 1e3, gap=(ks[n][0] - ks[i][1]) / 1e3,
                    nongraph=' '.join(k[3] for k in ks[j + 1:i + 1])))
dec = [o for o in out if 2000 < o['graph'] < 4000][-255:]
print(sys.argv[2], len(out), 'sampled steps,', len(dec), 'decode steps at 100K (last request); medians in us:')
for key in ('graph', 'cand_gap', 'cand', 'sample', 'tail', 'gap'):
    print('  %-9s %9.2f' % (key, st.median(o[key] for o in dec)))
print('  kernels after the graph:', dec[-1]['nongraph'] if dec else '-')
PY
done
echo "done at ${SECONDS}s"
