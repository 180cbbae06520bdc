#!/usr/bin/env python3
"""Development check: the global loads each kernel issues before griddepcontrol.wait, from its SASS.

ptxas may schedule read-only-path loads (LDG.*.CONSTANT, from ld.global.nc / __ldg) above the wait
(ACQBULK in SASS) where no loop or branch holds them below it (fortieth session, docs/performance.md).
Loads of weights (LDG.E.EF: load_stream), norm gammas, the router's bias and the attention's step
metadata may legitimately come first; activations, routing and new K/V rows must not. This lists
every kernel with read-only or plain loads before its first ACQBULK so a reader can check which ones.

  pip download nvidia-cuda-cuobjdump   # the toolkit here ships no cuobjdump; unzip the wheel
  cuobjdump -sass build/CMakeFiles/striker_backend_cuda.dir/src/backends/cuda/nvfp4/nvfp4_gemv.cu.o > g.sass
  python3 scripts/sass_prewait_loads.py g.sass
"""
import re
import subprocess
import sys


def prewait_loads(path):
    kernels, cur = {}, None
    for line in open(path):
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            cur = m.group(1)
            kernels[cur] = {"waited": False, "loads": {}}
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9._]+)", line)
        if not (cur and m):
            continue
        op, k = m.group(1), kernels[cur]
        if op == "ACQBULK":
            k["waited"] = True
        elif op.startswith("LDG") and not k["waited"]:
            k["loads"][op] = k["loads"].get(op, 0) + 1
    return kernels


def main():
    for path in sys.argv[1:]:
        for name, k in prewait_loads(path).items():
            # Streamed (EF: weights) loads are expected before the wait; anything else is listed.
            listed = {op: n for op, n in k["loads"].items() if ".EF" not in op}
            if listed:
                pretty = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
                print(f"{listed}  {pretty[:160]}")


if __name__ == "__main__":
    main()
