#!/usr/bin/env python3
"""Whether the tuner's recorded figures differ from tune_quality's re-measurement because the GPU
ran at another clock: from a quality run made with QUALITY_TRACE=1 (bench/device_hd8.sh), the
worker's timed conversation (bench/worker_tap_ts.py: TAP.in, TAP.out), nvidia-smi's samples
(SMI: nvidia-smi's CSV of timestamp in UTC, SM MHz, W, degrees C) and quality.json (each bucket's measurement
window), for every recorded winner: the race it was recorded in (the race piece whose median of
rounds is the recorded figure), the mean SM clock, power and temperature over that race and over
the bucket's re-measurement, and the two ratios side by side. Where recorded / measured follows
measured clock / race clock, the figures differ by the clock the board ran at, not by the method.

    python3 bench/clock_match.py --tap OUT/tap --smi OUT/smi.csv --quality OUT/quality.json
"""
import argparse
import datetime
import json
import re
import statistics
import sys


def races(tap):
    """[(sent, answered, [median of rounds per piece], [rounds per piece])] of the ok races."""
    out = []
    with open(tap + ".in") as f_in:
        cmds = [ln.split(" ", 1) for ln in f_in.read().splitlines() if " race id=" in ln[:40]]
    cmds = [(float(ts), re.search(r"id=(\d+)", c).group(1)) for ts, c in cmds]
    with open(tap + ".out") as f_out:
        for ln in f_out:
            ts, _, rest = ln.partition(" ")
            if not rest.startswith("raced ") or "status=ok" not in rest:
                continue
            t1 = float(ts)
            ident = re.search(r"id=(\d+)", rest).group(1)
            t0 = max((c for c in cmds if c[1] == ident and c[0] <= t1), default=(None,))[0]
            pieces = [[float(x) for x in m.split(",")] for m in re.findall(r" ms\d+=([0-9.,e+-]+)", rest)]
            out.append((t0, t1, [statistics.median(p) for p in pieces], pieces))
    return out


def samples(path):
    """nvidia-smi's lines (timestamp in UTC, SM MHz, W, C) as (epoch seconds, MHz, W, C)."""
    rows = []
    with open(path) as f:
        for ln in f:
            parts = [p.strip() for p in ln.split(",")]
            try:
                t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
                t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
                rows.append((t,) + tuple(float(p) for p in parts[1:4]))
            except (ValueError, IndexError):
                continue
    return rows


def over(smi, t0, t1):
    """Mean SM clock, power, temperature of the samples in [t0, t1] (the nearest one if none)."""
    inside = [s for s in smi if t0 <= s[0] <= t1]
    if not inside and smi:
        inside = [min(smi, key=lambda s: abs(s[0] - (t0 + t1) / 2))]
    if not inside:
        return (float("nan"),) * 3
    return tuple(statistics.mean(s[i] for s in inside) for i in (1, 2, 3))


def match(rs, smi, q):
    """The rows described at the top, printed; returned as a list of dicts."""
    out = []
    print("%-44s %-10s %9s %9s %6s | %7s %7s %6s | %5s %5s | %4s %4s | %s" % (
        "bucket", "tune", "recorded", "measured", "r/m", "MHz rc", "MHz ms", "ms/rc", "W rc", "W ms", "C rc",
        "C ms", "race rounds"))
    for r in q["rows"]:
        key = json.loads(r["key"])
        name = "d=%d causal=%d sq=%d" % (key["d"], key["causal"], key["sq"])
        mc = over(smi, *r["window"]) if "window" in r else (float("nan"),) * 3
        for tune, rec_k, meas_k in (("search", "search_recorded_ms", "search_ms"),
                                    ("oracle", "exhaustive_recorded_ms", "exhaustive_ms"),
                                    ("second", "second_recorded_ms", "second_ms")):
            if rec_k not in r:
                continue
            rec, meas = r[rec_k], r[meas_k]
            hit = [(t0, t1, p) for t0, t1, meds, ps in rs for m, p in zip(meds, ps) if abs(m - rec) <= 1e-6 * rec]
            if hit and hit[-1][0] is not None:
                t0, t1, rounds = hit[-1]
                rc = over(smi, t0, t1)
            else:
                rc, rounds = (float("nan"),) * 3, []
            row = {"bucket": name, "tune": tune, "recorded_ms": rec, "measured_ms": meas, "race_mhz": rc[0],
                   "measure_mhz": mc[0], "race_w": rc[1], "measure_w": mc[1], "race_c": rc[2], "measure_c": mc[2],
                   "rounds": rounds, "found": bool(hit)}
            out.append(row)
            print("%-44s %-10s %9.4f %9.4f %6.3f | %7.0f %7.0f %6.3f | %5.0f %5.0f | %4.0f %4.0f | %s" % (
                name, tune, rec, meas, rec / meas, rc[0], mc[0], mc[0] / rc[0], rc[1], mc[1], rc[2], mc[2],
                ",".join("%.4f" % x for x in rounds) if rounds else "(not raced)"))
    return out


def selftest():
    """Made-up files whose answer is known: a race at 1500 MHz, a re-measurement at 1800."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        tap = os.path.join(d, "tap")
        with open(tap + ".in", "w") as f:
            f.write("99.0 shape id=1 op=fwd b=1\n100.0 race id=7 n=2 rounds=3 budget=11 ; key=a ; key=b\n")
        with open(tap + ".out", "w") as f:
            f.write("99.5 shaped id=1 status=ok\n100.5 raced id=7 status=ok time_ms=500 ms0=1.2,1.0,1.1 "
                    "ms1=2,2,2 detail=\n")
        smi = os.path.join(d, "smi.csv")
        with open(smi, "w") as f:
            for t, mhz in ((100.2, 1500), (100.4, 1500), (150.0, 1980), (200.2, 1800), (200.6, 1800)):
                stamp = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y/%m/%d %H:%M:%S.%f")
                f.write("%s, %d, 650.0, 60\n" % (stamp[:-3], mhz))
        q = {"rows": [{"key": json.dumps({"d": 64, "causal": 0, "sq": 1024}), "window": [200.0, 201.0],
                       "search_recorded_ms": 1.1, "search_ms": 1.0, "exhaustive_recorded_ms": 3.0,
                       "exhaustive_ms": 3.0}]}
        rows = match(races(tap), samples(smi), q)
    ok = (len(rows) == 2 and rows[0]["found"] and rows[0]["race_mhz"] == 1500 and rows[0]["measure_mhz"] == 1800
          and rows[0]["rounds"] == [1.2, 1.0, 1.1] and not rows[1]["found"])
    print("clock_match selftest: %s" % ("ok" if ok else "FAIL %s" % rows))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tap")
    ap.add_argument("--smi")
    ap.add_argument("--quality")
    ap.add_argument("--json")
    ap.add_argument("--selftest", action="store_true", help="check the matching on made-up files, then exit")
    a = ap.parse_args()
    if a.selftest:
        sys.exit(selftest())
    if not (a.tap and a.smi and a.quality):
        ap.error("--tap, --smi and --quality are required")
    out = match(races(a.tap), samples(a.smi), json.load(open(a.quality)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
