#!/bin/sh
# bench/op_overhead.py where it cannot measure: bad arguments are refused (exit 2, saying which)
# before PyTorch is imported; then a short run, which says "skipped" and exits 77 without
# PyTorch or a GPU, and elsewhere must write a row per shape and system to its --json file.
#   op_overhead_args.sh PYTHON SOURCE_DIR WORK_DIR
py=$1; script=$2/bench/op_overhead.py; work=$3
fail() { echo "op_overhead args: FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
refused() { # refused WHAT ARG...: the script must exit 2 and say WHAT
  what=$1; shift
  out=$("$py" "$script" "$@" 2>&1); rc=$?
  [ $rc -eq 2 ] || fail "'$*' exited $rc, not 2: $out"
  case $out in *"$what"*) ;; *) fail "'$*' does not say '$what': $out" ;; esac
}
refused "unknown shape 'nosuch'" --shapes nosuch
refused "--calls must be at least 1" --calls 0
refused "--first-runs must not be negative" --first-runs -1
refused "invalid choice" --dtype f32
refused "--first-call takes" --first-call context,prefill
out=$("$py" "$script" --calls 3 --rounds 1 --gpu-reps 2 --first-runs 0 --json "$work/out.json" 2> "$work/err"); rc=$?
case $rc in
  77) said=$(printf '%s\n' "$out" | grep '^skipped: ') || fail "exit 77 without saying 'skipped': $out $(cat "$work/err")"
      echo "op_overhead args: ok (arguments refused; the run itself $said)"
      exit 0 ;;
  0) ;;
  *) fail "the short run exited $rc: $out $(tail -n 5 "$work/err")" ;;
esac
"$py" - "$work/out.json" <<'PY' || fail "the short run's JSON: $out"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["per_call"]
assert sorted((r["shape"], r["system"]) for r in rows) == sorted(
    (s, y) for s in ("prefill", "decode") for y in ("op", "context", "sdpa")), rows
assert all(r["wall_us"] > 0 and r["gpu_us"] > 0 for r in rows), rows
PY
echo "op_overhead args: ok (arguments refused; a short run wrote every row)"
