#!/bin/sh
# Plans a whole space and checks it: nothing fails to compile, nothing exceeds a limit.
#
#   plan_space.sh FLASHTUNE SPEC ARCH [N]
#
# With N, only a sample of N of the variants that pruning keeps is compiled (flashtune plan
# --sample N; pruning still runs on all of them): exactly N must compile, and the sample must
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
grep -q '^summary .* 0 compile errors, 0 over limits$' "$out" || fail "a variant failed to compile or exceeds a limit"
if [ -n "$n" ]; then
  grep -E -q "^summary .*: [0-9]+ variants: $n compiled " "$out" || fail "the sample did not compile $n variants"
  grep -E -q "^sample: $n of [0-9]+ kept variants \\(seed 0\\), with every one of the [0-9]+ parameter values" "$out" ||
    fail "the sample of $n lacks parameter values that kept variants have"
fi
echo "plan_space: ok"
