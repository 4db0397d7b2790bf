#!/bin/bash
# One call on the GPU machine: a full tune of the default spec into a fresh database, the
# winners, then (time allowing) a second tune that re-measures a subset, to check that two
# tunes pick winners whose times agree. Expects the build of bench/device_check.sh.
set -u
BUILD=${BUILD:-build-dev}
OUT=${OUT:-/tmp/ft-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/$BUILD/deps:${LD_LIBRARY_PATH:-}
export FLASHTUNE_CACHE_DIR=/tmp/ft-cache
ft=$BUILD/flashtune
db=$OUT/tuning.db
summary=$OUT/tune_summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

t0=$(date +%s)
timeout ${TUNE_LIMIT:-480} $ft tune --db "$db" -q > "$OUT/tune1.txt" 2>&1
note "tune 1: rc=$? in $(( $(date +%s) - t0 )) s"
cat "$OUT/tune1.txt" | tee -a "$summary"
$ft query --db "$db" > "$OUT/winners.txt" 2>&1
$ft query --db "$db" --all --json > "$OUT/all.jsonl" 2>&1
note "winners: $(grep -c winner "$OUT/winners.txt")"

left=$(( ${CALL_LIMIT:-570} - ($(date +%s) - t0) ))
if [ "$left" -gt 60 ]; then
  cp "$db" /tmp/second.db
  t1=$(date +%s)
  timeout $((left - 20)) $ft tune --db /tmp/second.db --remeasure --only "${SECOND_ONLY:-d=128}" -q > "$OUT/tune2.txt" 2>&1
  note "tune 2 (--remeasure --only ${SECOND_ONLY:-d=128}): rc=$? in $(( $(date +%s) - t1 )) s"
  tail -n 5 "$OUT/tune2.txt" | tee -a "$summary"
  $ft query --db /tmp/second.db --json > "$OUT/winners2.jsonl" 2>&1
  $ft query --db "$db" --json > "$OUT/winners1.jsonl" 2>&1
  python3 - "$OUT/winners1.jsonl" "$OUT/winners2.jsonl" "${SECOND_ONLY:-d=128}" <<'PY' | tee -a "$summary"
import json, sys
def load(p):
    out = {}
    for line in open(p):
        if line.startswith("{"):
            r = json.loads(line)
            out[(r["dtype"], r["d"], r["causal"], r["seqlen_bucket"], r["bh_bucket"])] = r
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
d = int(sys.argv[3].split("d=")[1].split(",")[0])
common = [k for k in b if k in a and k[1] == d]
worst = 0.0
same = 0
for k in sorted(common):
    ra, rb = a[k], b[k]
    diff = abs(ra["median_ms"] - rb["median_ms"]) / ra["median_ms"]
    worst = max(worst, diff)
    same += ra["variant"] == rb["variant"]
print("second tune vs first: %d buckets compared, same winner in %d, winner times differ by at most %.1f%%"
      % (len(common), same, 100 * worst))
PY
fi
note "total: $(( $(date +%s) - t0 )) s"
