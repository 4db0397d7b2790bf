#!/usr/bin/env python3
"""The tuner's worker with its conversation logged and timed: every command to TAP_LOG.in and
every answer to TAP_LOG.out, each line after the wall-clock time (seconds since the epoch, as
nvidia-smi's samples are stamped) at which it passed; bench/clock_match.py reads them.

    FLASHTUNE_WORKER=bench/worker_tap_ts.py TAP_REAL=path/to/flashtune TAP_LOG=/tmp/tap flashtune tune ...
"""
import os
import subprocess
import sys
import threading
import time


def main():
    log = os.environ["TAP_LOG"]
    w = subprocess.Popen([os.environ["TAP_REAL"]] + sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, bufsize=1)
    fin = open(log + ".in", "a", buffering=1)
    fout = open(log + ".out", "a", buffering=1)

    def answers():
        for line in w.stdout:
            fout.write("%.4f %s" % (time.time(), line))
            sys.stdout.write(line)
            sys.stdout.flush()

    t = threading.Thread(target=answers, daemon=True)
    t.start()
    try:
        for line in sys.stdin:
            fin.write("%.4f %s" % (time.time(), line))
            w.stdin.write(line)
            w.stdin.flush()
        w.stdin.close()
    except BrokenPipeError:
        pass
    t.join()
    sys.exit(w.wait())


if __name__ == "__main__":
    main()
