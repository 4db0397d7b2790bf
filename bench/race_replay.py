#!/usr/bin/env python3
"""Replays a tuner's race on a fresh worker, several ways, to see where a race's figures come
from: from bench/worker_tap.sh's log, the shape command of the bucket whose keys number --sk and
its race command; then that race as logged, the same kernels in reverse order, each kernel in a
race of its own, and each in a measure command (verified, then timed) — every answer printed.

    python3 bench/race_replay.py --flashtune .dev/run/flashtune --log /tmp/tap --sk 8192
"""
import argparse
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashtune", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--sk", type=int, required=True)
    ap.add_argument("--cache-dir", default=None)
    a = ap.parse_args()
    cmds = open(a.log + ".in").read().splitlines()
    shape = race = None
    for c in cmds:
        if c.startswith("shape ") and (" sk=%d " % a.sk) in c + " " and " seed=1000" not in c:
            shape, race = c, None
        elif c.startswith("race ") and shape is not None and race is None:
            race = c
            break
    if shape is None or race is None:
        sys.exit("race_replay: no shape of sk=%d with a race after it in %s.in" % (a.sk, a.log))
    head, *parts = race.split(" ; ")
    argv = [a.flashtune, "worker", "--device", "0"] + (["--cache-dir", a.cache_dir] if a.cache_dir else [])
    w = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    print(w.stdout.readline().strip()[:120])
    ident = [1000]

    def ask(line):
        ident[0] += 1
        line = re.sub(r" id=\d+", " id=%d" % ident[0], line, count=1)
        w.stdin.write(line + "\n")
        w.stdin.flush()
        return w.stdout.readline().strip()

    def entry(p):
        m = re.search(r"entry=(\S+)", p)
        return m.group(1)[-60:] if m else "?"

    def race_of(ps):
        h = re.sub(r" n=\d+", " n=%d" % len(ps), head)
        return h + "".join(" ; " + p for p in ps)

    print("shape:", ask(shape))
    print("kernels:", *["%d %s" % (i, entry(p)) for i, p in enumerate(parts)], sep="\n  ")
    print("race as logged:", ask(race))
    print("race reversed: ", ask(race_of(parts[::-1])))
    print("race as logged:", ask(race))
    for i, p in enumerate(parts):
        print("race of %d alone:" % i, ask(race_of([p])))
    for i, p in enumerate(parts):
        m = "measure id=1" + re.sub(r" verify=0 budget=\d+", " verify=1 budget=30", " " + p)
        print("measure %d:" % i, ask(m)[:160])
    w.stdin.write("quit\n")
    w.stdin.flush()
    w.wait()


if __name__ == "__main__":
    main()
