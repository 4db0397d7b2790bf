#!/usr/bin/env python3
"""How one kernel's time moves as the GPU keeps running it, on the GPU machine: the variant
(--spec, --variant) on --shape through the library, each repetition after the L2 flush and timed
by CUDA events, back to back for --load seconds, then idle for --idle seconds, --cycles times;
the median of each --window ms of GPU time printed beside what nvidia-smi sampled meanwhile (SM
clock, power, temperature, throttle reasons). It tells how long the GPU takes to settle under
load and to recover when idle, which decides how a timing's heat and a re-measurement's
conditions compare.

    python3 bench/sustain.py --spec specs/flash_fwd_sm90.lua --shape b=2,hq=32,sq=8192 \\
        --variant d=64,bm=192,bn=128,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=0,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1

(--selftest checks the sampling's bookkeeping on made-up samples, without a GPU.)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from tune_quality import timed_call

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

SMI_FIELDS = "timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def smi_start(path, period_ms):
    f = open(path, "w")
    p = subprocess.Popen(["nvidia-smi", "--query-gpu=" + SMI_FIELDS, "--format=csv,noheader,nounits",
                          "-lms", str(period_ms)], stdout=f, stderr=subprocess.DEVNULL)
    return p, f


def smi_read(path):
    """(unix seconds, MHz, W, C, throttle mask) per sample."""
    import datetime
    rows = []
    for line in open(path):
        parts = [x.strip() for x in line.split(",")]
        if len(parts) < 5:
            continue
        try:
            t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            rows.append((t, float(parts[1]), float(parts[2]), float(parts[3]), int(parts[4], 16)))
        except ValueError:
            continue
    return rows


def window_rows(windows, samples, t_origin):
    """Each window (cycle, wall start, wall end, reps, median ms) with the medians of the
    nvidia-smi samples taken within it (the nearest one when none was), its hottest temperature
    and the throttle reasons seen (or-ed)."""
    rows = []
    for c, w0, w1, n, med in windows:
        s = [x for x in samples if w0 <= x[0] <= w1]
        if not s and samples:
            s = [min(samples, key=lambda x: abs(x[0] - w0))]
        mask = 0
        for x in s:
            mask |= x[4]
        rows.append({"cycle": c, "t_s": round(w0 - t_origin, 3), "reps": n, "median_ms": med,
                     "mhz": statistics.median(x[1] for x in s) if s else None,
                     "watts": statistics.median(x[2] for x in s) if s else None,
                     "temp_c": max(x[3] for x in s) if s else None,
                     "throttle": "%#x" % mask})
    return rows


def selftest():
    """smi_read and window_rows on made-up samples; 0 when they hold."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write("2026/12/05 10:00:00.000, 1980, 130.5, 40, 0x0000000000000000\n"
                "2026/12/05 10:00:00.100, 1700, 690.0, 50, 0x0000000000000004\n"
                "2026/12/05 10:00:00.200, 1600, 700.0, 52, 0x0000000000000004\n"
                "garbage line\n"
                "2026/12/05 10:00:02.000, 1980, 120.0, 45, 0x0000000000000000\n")
        path = f.name
    samples = smi_read(path)
    os.unlink(path)
    t0 = samples[0][0] if samples else 0.0
    rows = window_rows([(0, t0 + 0.05, t0 + 0.25, 10, 2.2), (1, t0 + 1.0, t0 + 1.1, 5, 2.1)], samples, t0)
    ok = (len(samples) == 4 and rows[0]["mhz"] == 1650 and rows[0]["watts"] == 695.0 and rows[0]["temp_c"] == 52
          and rows[0]["throttle"] == "0x4" and rows[1]["mhz"] == 1600 and rows[1]["throttle"] == "0x4"
          and abs(rows[1]["t_s"] - 1.0) < 1e-6)
    print("sustain selftest: %s" % ("ok" if ok else "FAIL %s %s" % (samples, rows)))
    return 0 if ok else 1


def main():
    if "--selftest" in sys.argv[1:]:
        sys.exit(selftest())
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--shape", required=True, help="b=..,hq=..,sq=.. (hkv, sk, causal optional)")
    ap.add_argument("--load", type=float, default=10.0)
    ap.add_argument("--idle", type=float, default=2.0)
    ap.add_argument("--cycles", type=int, default=2)
    ap.add_argument("--window", type=float, default=250.0, help="ms of GPU time per printed median")
    ap.add_argument("--smi-ms", type=int, default=100)
    ap.add_argument("--json")
    a = ap.parse_args()
    import torch
    import flashtune
    sh = {k: int(v) for k, v in (kv.split("=") for kv in a.shape.split(","))}
    sh.setdefault("hkv", sh["hq"])
    sh.setdefault("sk", sh["sq"])
    vd = dict(kv.split("=") for kv in a.variant.split(","))
    d, causal = int(vd["d"]), bool(sh.get("causal", 0))
    dt = torch.bfloat16 if vd.get("dtype", "f16") == "bf16" else torch.float16
    q = torch.randn(sh["b"], sh["sq"], sh["hq"], d, device="cuda", dtype=dt)
    k = torch.randn(sh["b"], sh["sk"], sh["hkv"], d, device="cuda", dtype=dt)
    v = torch.randn_like(k)
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    ctx = flashtune.Context(spec=a.spec, variant=a.variant)
    ctx.forward(q, k, v, causal=causal)
    torch.cuda.synchronize()
    smi_path = "/tmp/sustain-smi-%d.csv" % os.getpid()
    smi, smi_f = smi_start(smi_path, a.smi_ms)
    time.sleep(0.5)
    windows = []  # (cycle, wall start, wall end, n, median ms)
    t_origin = time.time()
    for c in range(a.cycles):
        t_end = time.time() + a.load
        while time.time() < t_end:
            w0 = time.time()
            ev, gpu_ms = [], 0.0
            while gpu_ms < a.window:
                batch = [timed_call(flush, lambda: ctx.forward(q, k, v, causal=causal)) for _ in range(8)]
                torch.cuda.synchronize()
                ms = [e0.elapsed_time(e1) for e0, e1 in batch]
                ev += ms
                gpu_ms += sum(ms)
            windows.append((c, w0, time.time(), len(ev), statistics.median(ev)))
        time.sleep(a.idle)
    smi.terminate()
    smi.wait()
    smi_f.close()
    samples = smi_read(smi_path)
    rows = window_rows(windows, samples, t_origin)
    for row in rows:
        print("cycle %d t=%7.2f s  %4d reps  median %.4f ms  %s MHz  %s W  %s C  throttle %s" % (
            row["cycle"], row["t_s"], row["reps"], row["median_ms"], row["mhz"], row["watts"], row["temp_c"],
            row["throttle"]), flush=True)
    first = [r["median_ms"] for r in rows if r["cycle"] == 0][:2]
    last = [r["median_ms"] for r in rows if r["cycle"] == 0][-4:]
    if first and last:
        print("first windows %.4f ms, last of cycle 0 %.4f ms: %.3f" % (
            statistics.median(first), statistics.median(last), statistics.median(last) / statistics.median(first)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"spec": a.spec, "variant": a.variant, "shape": a.shape, "rows": rows, "smi": samples}, f)


if __name__ == "__main__":
    main()
