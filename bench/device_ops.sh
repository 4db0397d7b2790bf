#!/bin/bash
# The GPU checks of the operations rework, as they were run (two calls on the GPU machine):
#   bash bench/device_ops.sh verify   every sm_90a variant through `flashtune verify`, then the
#                                     GPU tests (test_gpu, gpu_tune, test_python, pack's GPU part)
#   bash bench/device_ops.sh tests    the GPU tests alone
#   bash bench/device_ops.sh pack     pack.sh's GPU part alone
#   bash bench/device_ops.sh ab       the forward with this build and with the one before the
#                                     rework (OLD), interleaved: the built-in default kernel of
#                                     every (head dim, causality) at seqlen 512, 2k and 8k, bf16,
#                                     on the papers' grid (16k tokens, hidden 2048), AB_ROUNDS
#                                     rounds (default 2; timing only: verify has checked every
#                                     variant), AB_DIMS the head dims (default "64 128 256")
# Expects what bench/NOTES.md's device sections describe: a build with -DFT_STATIC_DEPS=ON in
# $RUN (default .dev/run: flashtune, libflashtune.so*, attention, tests/test_gpu,
# tests/fake_worker, deps/liblua5.4.so.0 and libsqlite3.so.0, old/flashtune). Logs go to $OUT.
set -u
RUN=${RUN:-.dev/run}
OUT=${OUT:-/tmp/ft-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/$RUN:$PWD/$RUN/deps:${LD_LIBRARY_PATH:-}
export FLASHTUNE_CACHE_DIR=/tmp/ft-cache FLASHTUNE_LIB=$PWD/$RUN/libflashtune.so PYTHONUNBUFFERED=1
ft=$RUN/flashtune
summary=$OUT/summary.txt
note() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
sha256sum templates/*.cuh templates/include/*.cuh | tee "$OUT/templates.sha256" >/dev/null

case ${1:-} in
verify)
  : > "$summary"
  t0=$(date +%s)
  timeout 420 "$ft" verify flash_fwd_sm90 -q > "$OUT/verify_sm90.txt" 2>&1
  rc=$?
  note "verify flash_fwd_sm90: exit $rc in $(( $(date +%s) - t0 )) s: $(grep -E 'variants|pass|fail' "$OUT/verify_sm90.txt" | tail -2 | tr '\n' ' ')"
  ;&
tests)  "$RUN/tests/test_gpu" > "$OUT/test_gpu.txt" 2>&1; note "test_gpu: exit $? ($(tail -1 "$OUT/test_gpu.txt"))"
  sh tests/gpu_tune.sh "$ft" "$RUN/attention" > "$OUT/gpu_tune.txt" 2>&1; note "gpu_tune: exit $? ($(tail -1 "$OUT/gpu_tune.txt"))"
  python3 tests/test_python.py > "$OUT/test_python.txt" 2>&1; note "test_python: exit $? ($(tail -1 "$OUT/test_python.txt"))"
  ;&
pack)
  FLASHTUNE_WORKER=$PWD/$RUN/tests/fake_worker sh tests/pack.sh "$ft" "$RUN/tests/fake_worker" cc "$RUN/libflashtune.so" \
    > "$OUT/pack.txt" 2>&1; note "pack.sh: exit $? ($(tail -1 "$OUT/pack.txt"))"
  ;;
ab)
  : > "$OUT/ab.jsonl"
  t0=$(date +%s)
  rounds=${AB_ROUNDS:-2}
  for round in $(seq "$rounds"); do
    for d in ${AB_DIMS:-64 128 256}; do
      for causal in 0 1; do
        case $d.$causal in
          64.0) v="bm=192,bn=128,stages=2,pingpong=0,overlap=0,balance=0" ;;
          64.1) v="bm=128,bn=128,stages=3,pingpong=0,overlap=1,balance=1" ;;
          128.0) v="bm=128,bn=128,stages=2,pingpong=0,overlap=1,balance=0" ;;
          128.1) v="bm=128,bn=128,stages=2,pingpong=0,overlap=1,balance=1" ;;
          256.0) v="bm=128,bn=80,stages=2,pingpong=0,overlap=1,balance=0" ;;
          256.1) v="bm=128,bn=80,stages=2,pingpong=1,overlap=1,balance=1" ;;
        esac
        for s in 512 2048 8192; do
          shape="b=$((16384 / s)),hq=$((2048 / d)),sq=$s,d=$d"
          c=""; [ "$causal" = 1 ] && c="--causal"
          for build in new old; do
            bin=$ft; [ $build = old ] && bin=$RUN/old/flashtune
            line=$("$bin" run --spec flash_fwd_sm90 --variant "d=$d,$v" --shape "$shape" $c --dtype bf16 --json --no-verify \
                   --cache-dir /tmp/ft-cache-$build 2>"$OUT/ab_err.txt" | tail -1)
            echo "{\"round\": $round, \"build\": \"$build\", \"d\": $d, \"causal\": $causal, \"s\": $s, \"run\": ${line:-null}}" >> "$OUT/ab.jsonl"
          done
        done
      done
    done
  done
  note "ab: $rounds rounds in $(( $(date +%s) - t0 )) s"
  python3 - "$OUT/ab.jsonl" "$rounds" <<'PY' | tee -a "$summary"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    if r["run"] is None:
        print("missing:", r["build"], r["d"], r["causal"], r["s"]); continue
    by.setdefault((r["d"], r["causal"], r["build"]), {}).setdefault(r["s"], []).append(r["run"]["tflops"])
def gm(xs): return math.exp(sum(math.log(x) for x in xs) / len(xs))
print("group         new TFLOP/s  old TFLOP/s  new/old   (geometric mean over seqlen of the best of %s interleaved rounds)" % sys.argv[2])
for d in (64, 128, 256):
    for c in (0, 1):
        n = by.get((d, c, "new"), {}); o = by.get((d, c, "old"), {})
        if not n or not o: continue
        gn = gm([max(v) for v in n.values()]); go = gm([max(v) for v in o.values()])
        print("d=%-3d causal=%d  %8.1f     %8.1f     %.3f" % (d, c, gn, go, gn / go))
PY
  ;;
*) echo "usage: bash bench/device_ops.sh verify|tests|pack|ab" >&2; exit 2 ;;
esac
