#!/usr/bin/env python3
"""The SASS of a tuning database's sm_90a winners, without a GPU.

For every distinct winning variant of the flash_fwd_sm90 family in the database: the cubin
that `flashtune gen --cubin` compiles (NVRTC, the tuner's own compile path, whose register
allocation can differ from nvcc's), read with `cuobjdump -sass`. Each kernel must show HGMMA of both of its shapes (64x{bn}x16 for S,
64x{d}x16 for P.V), TMA loads (UTMALDG), no mma.sync (HMMA), no register spills and no wgmma
that ptxas serialised. One line per variant, a summary last; exit status 1 when any fails.

  python3 bench/winners_sass.py --flashtune build/flashtune --db tuning.db
  python3 bench/winners_sass.py --flashtune build/flashtune --variant d=128,bm=128,...

cuobjdump comes from $CUOBJDUMP, PATH, /usr/local/cuda/bin or the copy scripts/setup.sh
fetches into ~/.cache/flashtune/tools.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

def find_cuobjdump():
    for c in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump",
              os.path.expanduser("~/.cache/flashtune/tools/nvidia/cu13/bin/cuobjdump")):
        if c and os.access(c, os.X_OK):
            return c
    return None


def winners(flashtune, db):
    out = subprocess.run([flashtune, "query", "--db", db, "--json"], capture_output=True, text=True, check=True)
    seen = []
    for line in out.stdout.splitlines():
        row = json.loads(line)
        v = row["variant"]
        if row.get("winner") and "pingpong=" in v and v not in seen:  # the sm90 family's knob
            seen.append(v)
    return seen


def check(flashtune, cuobjdump, variant, tmp):
    path = os.path.join(tmp, "k.cubin")
    gen = subprocess.run([flashtune, "gen", "flash_fwd_sm90", "--arch", "sm_90a", "--variant", variant,
                          "-o", os.devnull, "--cubin", path], capture_output=True, text=True)
    log = gen.stderr
    if gen.returncode != 0:
        return ["gen: " + (log.strip().splitlines() or ["failed"])[-1]]
    if "flashtune gen: note:" in log:
        return ["gen: " + log.split("flashtune gen: note:")[1].splitlines()[0].strip()]
    problems = []
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    if m is None:
        problems.append("no ptxas report")
    elif m.group(1) != "0" or m.group(2) != "0":
        problems.append("spills %s/%s B" % (m.group(1), m.group(2)))
    if "wgmma.mma_async instructions are serialized" in log:
        problems.append("ptxas serialised the wgmmas")
    sass = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True).stdout
    if "EXIT" not in sass:
        return problems + ["cuobjdump gave no SASS"]
    d = re.search(r"\bd=(\d+)", variant).group(1)
    bn = re.search(r"\bbn=(\d+)", variant).group(1)
    for shape in (bn, d):
        if not re.search(r"HGMMA\.64x%sx16\.F32" % shape, sass):
            problems.append("no HGMMA.64x%sx16" % shape)
    if "UTMALDG" not in sass:
        problems.append("no UTMALDG")
    if re.search(r"\bHMMA\.", sass):
        problems.append("HMMA (mma.sync) present")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashtune", required=True)
    ap.add_argument("--db", help="tuning database: its sm_90a winners")
    ap.add_argument("--variant", action="append", default=[], help="a variant to check (repeatable)")
    args = ap.parse_args()
    variants = list(args.variant)
    if args.db:
        variants += [v for v in winners(args.flashtune, args.db) if v not in variants]
    if not variants:
        sys.exit("winners_sass: no sm_90a variant to check (--db with sm_90a winners, or --variant)")
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        sys.exit("winners_sass: no cuobjdump (set CUOBJDUMP, or run scripts/setup.sh to fetch one)")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, v in enumerate(variants, 1):
            problems = check(args.flashtune, cuobjdump, v, tmp)
            bad += bool(problems)
            print("%s %s" % (v, "FAIL: " + "; ".join(problems) if problems else
                             "ok: HGMMA of both shapes, UTMALDG, no HMMA, no spills, wgmmas not serialised"),
                  flush=True)
            print("  [%d/%d]" % (i, len(variants)), file=sys.stderr, flush=True)
    print("summary: %d sm_90a variants, %d ok, %d failed" % (len(variants), len(variants) - bad, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
