#!/bin/sh
# A stand-in for the tuner's worker that is the real one with its conversation logged: every
# command to TAP_LOG.in, every answer to TAP_LOG.out (bench/race_replay.py replays them).
#   FLASHTUNE_WORKER=bench/worker_tap.sh TAP_REAL=path/to/flashtune TAP_LOG=/tmp/tap flashtune tune ...
tee -a "$TAP_LOG.in" | "$TAP_REAL" "$@" | tee -a "$TAP_LOG.out"
