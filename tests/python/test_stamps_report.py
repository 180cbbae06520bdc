"""scripts/stamps_report.py on made-up stamps whose boundaries, spans and phases are known: a chain of four
kernels a step, each CTA released `bound` ns after its predecessor's last exit."""
import pathlib
import struct
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "stamps_report.py"
POINTS = 8
# (kind, CTAs, boundary ns, span ns, ns from the release to point 2 or None)
CHAIN = [(1, 4, 600, 4000, 1000), (5, 3, 500, 6000, 2500), (1, 2, 700, 3000, None), (8, 2, 400, 5000, 1500)]


def make(path, steps=5, words=2 + 2 * POINTS):
    recs, seq, t = [], 0, 1_000_000
    for _ in range(steps):
        for kind, ctas, bound, span, p2 in CHAIN:
            rel = t + bound
            for b in range(ctas):
                g = [0] * POINTS
                g[0] = rel - 3000 + 10 * b
                g[1] = rel
                if p2 is not None:
                    g[2] = rel + p2
                g[7] = rel + span - (0 if b == ctas - 1 else 200 * (b + 1))  # the last CTA exits last
                c = [2 * x if x else 0 for x in g]  # a 2 GHz SM clock
                header = kind | (5 << 8) | (b << 20)
                recs.append([header, seq] + g + c)
                seq += 1
            t = rel + span
        t += 20_000  # between steps: unstamped kernels
    with open(path, "wb") as f:
        f.write(struct.pack("<II", words, len(recs)))
        for r in recs:
            f.write(struct.pack(f"<{len(r)}Q", *r))


def run(path, *extra):
    r = subprocess.run([sys.executable, str(SCRIPT), str(path), "--skip", "0", *extra], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def row(out, label, ctas):
    for line in out.splitlines():
        if line.startswith(label) and line[38:44].strip() == str(ctas):
            return line[38:].split()
    raise AssertionError(f"no row {label} ({ctas} CTAs) in:\n{out}")


def test_boundaries_spans_and_shares(tmp_path):
    make(tmp_path / "s.bin")
    out = run(tmp_path / "s.bin", "--steps", "5")
    assert "SM clock 2.000 GHz" in out
    # columns: CTAs, n, ahead, boundary, span, share, per step
    r = row(out, "attn_cluster <- nvfp4_gemv", 3)
    assert r[:7] == ["3", "5", "2.99", "0.50", "6.00", "6.50", "6.5"]
    r = row(out, "nvfp4_gemv <- attn_cluster", 2)
    assert r[3:6] == ["0.70", "3.00", "3.70"]
    r = row(out, "router <- nvfp4_gemv", 2)
    assert r[3:6] == ["0.40", "5.00", "5.40"]
    # The first kernel of a step follows the last of the previous one across the unstamped gap.
    r = row(out, "nvfp4_gemv <- router", 4)
    assert r[1] == "4" and r[4] == "4.00"


def test_phases_of_the_median_and_the_last_cta(tmp_path):
    make(tmp_path / "s.bin")
    out = run(tmp_path / "s.bin")
    line = next(l for l in out.splitlines() if l.startswith("attn_cluster <- nvfp4_gemv"))
    phases = dict(p.split(":") for p in line.split("   ")[-1].split())
    assert phases["0-1"] == "2.99|2.98"  # resident 3.00, 2.99, 2.98 µs before the release
    assert phases["1-2"] == "2.50|2.50"
    assert phases["2-7"].endswith("|3.50")    # the last CTA: 6.0 - 2.5
    assert phases["2-7"].startswith("3.30|")  # the median CTA exits 200 ns early


def test_steps_inferred_and_given(tmp_path):
    make(tmp_path / "s.bin", steps=6)
    assert "steps: 5 (the rarest" in run(tmp_path / "s.bin")  # the first launch has no predecessor
    out = run(tmp_path / "s.bin", "--steps", "6")
    assert "steps: 6 (given)" in out
    # per step: 6.5 + 3.7 + 5.4 (6 of 6 steps) + 24.6 (the gemv after the gap: 5 of 6 steps) = 36.1 µs
    assert "sum of the stamped kernels' shares per step: 36.1 µs" in out


def test_wrong_record_size_is_refused(tmp_path):
    make(tmp_path / "s.bin", words=12)
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "s.bin")], capture_output=True, text=True)
    assert r.returncode != 0 and "words per record" in r.stderr


def test_a_ring_that_lost_the_first_ctas_of_its_first_launch(tmp_path):
    """The ring keeps the newest records: its first launch may miss its first CTAs, whose block indices the
    next launch of that kernel brings first. The launches must still be cut where they are."""
    make(tmp_path / "full.bin")
    with open(tmp_path / "full.bin", "rb") as f:
        words, n = struct.unpack("<II", f.read(8))
        body = f.read()
    size = words * 8
    with open(tmp_path / "cut.bin", "wb") as f:  # drop the first stamped CTA: block 0 of the first gemv launch
        f.write(struct.pack("<II", words, n - 1))
        f.write(body[size:])
    out = run(tmp_path / "cut.bin")
    r = row(out, "attn_cluster <- nvfp4_gemv", 3)
    assert r[3:6] == ["0.50", "6.00", "6.50"]
    r = row(out, "nvfp4_gemv <- router", 4)  # the gemv launches after the cut keep their own CTAs
    assert r[1] == "4" and r[4] == "4.00"
