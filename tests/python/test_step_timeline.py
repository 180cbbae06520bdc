"""scripts/step_timeline.py on a made-up kernel trace whose shares are known: two replays of a
chain where each kernel starts before its predecessor ends (PDL), plus kernels outside the graph."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "step_timeline.py"
HEADER = "start_ns,end_ns,graph_id,stream_id,correlation,grid_x,grid_y,grid_z,block_x,smem,name\n"

# Per layer: (name, grid_x, share in ns, lead in ns). 49 layers make the layer view appear.
LAYER = [("gemv_kernel<4;8;0;true>", 1280, 7000, 2000), ("qk_rope_kv_kernel", 40, 1500, 500),
         ("attention_kernel", 36, 6000, 1000), ("router_kernel", 132, 9000, 3000)]


def make_trace(path, replays=4, jitter=0, layer=LAYER):
    rows = [HEADER, "0,5000,0,7,1,1,1,1,256,0,fill_kernel\n"]  # eager, not in a graph: ignored
    t = 1_000_000
    for rep in range(replays):
        end = t
        for _ in range(49):
            for name, grid, share, lead in layer:
                extra = jitter * rep if name == "router_kernel" else 0
                start, end = end - lead, end + share + extra
                rows.append(f"{start},{end},5,7,{900 + rep},{grid},1,1,256,0,{name}\n")
        t = end + 50_000
    path.write_text("".join(rows))


def run(path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(path), "test step"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def row(out, name):
    line = next(l for l in out.splitlines() if l.startswith(name))
    return line[72:].split()


def test_shares_leads_and_totals(tmp_path):
    trace = tmp_path / "t.csv"
    make_trace(trace)
    out = run(trace)
    # 4 replays: the first is dropped; 3 remain, each 49 x 4 kernels.
    assert "3 replays, 196 kernels" in out
    calls, share, lead, busy, ms, _ = row(out, "router_kernel [132x1x1]")
    assert calls == "49" and float(share) == 9.0 and float(lead) == 3.0 and float(busy) == 12.0
    assert abs(float(ms) - 49 * 9.0 / 1e3) < 1e-3
    # The first kernel of a replay has no predecessor: its share counts from its own start.
    calls, share, lead, busy, ms, _ = row(out, "gemv_kernel<4;8;0;true> [1280x1x1]")
    assert calls == "49" and abs(float(share) - (48 * 7.0 + 9.0) / 49) < 0.01
    total = (49 * sum(s for _, _, s, _ in LAYER) + 2000) / 1e6  # ms, + the first kernel's lead
    summed = float(next(l for l in out.splitlines() if l.startswith("sum of shares")).split()[-1])
    assert abs(summed - total) < 1e-3
    assert "-- one layer" in out and "router_kernel [132x1x1]" in out.split("-- one layer")[1]


def test_median_over_replays(tmp_path):
    trace = tmp_path / "t.csv"
    make_trace(trace, replays=6, jitter=1000)  # router slower by 1 us in each later replay
    out = run(trace)
    _, share, *_ = row(out, "router_kernel [132x1x1]")
    assert float(share) == 12.0  # replays 1..5 carry +1..+5 us: the median is +3


def test_no_graph_kernels(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "0,5000,0,7,1,1,1,1,256,0,fill_kernel\n")
    r = subprocess.run([sys.executable, str(SCRIPT), str(trace)], capture_output=True, text=True)
    assert r.returncode == 1 and "no graph kernels" in r.stdout


def test_compare_two_traces_per_kernel_family(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    make_trace(a)
    # B: the attention kernel 2 us faster, the router gone, a new fused kernel of 12 us.
    layer_b = [LAYER[0], LAYER[1], ("attention_kernel", 36, 4000, 1000), ("moe_fused_kernel<2>", 128, 12000, 500)]
    make_trace(b, layer=layer_b)
    r = subprocess.run([sys.executable, str(SCRIPT), str(a), "--compare", str(b), "A/B"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    rows = {l.split()[0]: l.split()[1:] for l in r.stdout.splitlines()[3:] if l.strip()}
    assert rows["attention_kernel"] == ["49", "0.294", "49", "0.196", "-0.098"]
    assert rows["router_kernel"] == ["49", "0.441", "0", "0.000", "-0.441"]
    assert rows["moe_fused_kernel"] == ["0", "0.000", "49", "0.588", "+0.588"]
    assert "kernels 196 -> 196" in r.stdout
