#!/bin/sh
# Plans a whole space and checks it: nothing fails to compile, nothing exceeds a limit (but the
# spilling variants a spec with spills = "reject" turns away).
#
#   plan_space.sh FLASHTUNE SPEC ARCH [N]
#
# With N, only a sample of N of the variants that pruning keeps is compiled (flashtune plan
# --sample N; pruning still runs on all of them): exactly N must compile (or spill), and the sample must
# have every parameter value that a kept variant has. Prints the summary and any row that
# failed; the table is kept in a temporary file only while the check runs.
set -eu
ft=$1 spec=$2 arch=$3 n=${4:-}
fail() { echo "plan_space: $*" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
if [ -n "$n" ]; then
  "$ft" plan "$spec" --arch "$arch" --sample "$n" -q >"$out" 2>&1 || rc=$?
else
  "$ft" plan "$spec" --arch "$arch" -q >"$out" 2>&1 || rc=$?
fi
grep -E ' (compile-error|over-limits) |^(summary|pruned|over limits|sample|cache|time|flashtune)' "$out" || true
[ "$rc" -le 128 ] || fail "flashtune plan crashed (status $rc)"
[ "$rc" -eq 0 ] || fail "flashtune plan failed (status $rc)"
# A spec whose register estimate is a lower bound (the backward's) sees some variants spill and,
# with spills = "reject", rejects them after compiling ("K spills registers"), and some whose
# wgmmas ptxas serialises for lack of registers ("K wgmmas serialised by ptxas", rejected for
# every spec): the plan's policy, not a failure. Any other limit, and any compile error, fails.
grep -q '^summary .* 0 compile errors, [0-9]* over limits$' "$out" || fail "a variant failed to compile"
spilled=$(sed -n 's/^summary .* 0 compile errors, \([0-9]*\) over limits$/\1/p' "$out")
if [ "$spilled" -gt 0 ]; then
  classes=$(sed -n 's/^over limits: //p' "$out" | tr ';' '\n' | sed 's/^ *//')
  counted=0
  while IFS= read -r class; do
    [ -n "$class" ] || continue
    case $class in
      *' spills registers (the spec rejects spills)' | *' wgmmas serialised by ptxas')
        counted=$((counted + ${class%% *})) ;;
      *) fail "a variant exceeds a limit other than the spec's rejection of spills or serialised wgmmas: $class" ;;
    esac
  done <<EOF2
$classes
EOF2
  [ "$counted" -eq "$spilled" ] || fail "over limits: $spilled, of which the known kinds account for $counted"
fi
if [ -n "$n" ]; then
  compiled=$(sed -n 's/^summary .*: [0-9]* variants: \([0-9]*\) compiled .*/\1/p' "$out")
  [ $((compiled + spilled)) -eq "$n" ] || fail "the sample compiled $compiled variants (and $spilled spilled), not $n"
  grep -E -q "^sample: $n of [0-9]+ kept variants \\(seed 0\\), with every one of the [0-9]+ parameter values" "$out" ||
    fail "the sample of $n lacks parameter values that kept variants have"
fi
echo "plan_space: ok"
