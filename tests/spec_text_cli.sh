#!/bin/sh
# flashtune plan on a spec whose constraint prunes with a reason full of terminal controls and
# whose code prints some: the output shows them as escapes (\x1b, \r) and holds none of the
# raw bytes. Usage: spec_text_cli.sh FLASHTUNE
set -u
ft=$1
out=$("$ft" plan tests/specs/reason_escape.lua --only causal=1 2>&1)
printf '%s\n' "$out"
fail() { echo "spec_text_cli: $*"; exit 1; }
esc=$(printf '\033')
cr=$(printf '\r')
bel=$(printf '\007')
case $out in *"$esc"* | *"$cr"* | *"$bel"*) fail "raw control characters reached the output" ;; esac
printf '%s\n' "$out" | grep -F -q 'bad\x1b[31mred\rback' || fail "the reason is not shown escaped"
printf '%s\n' "$out" | grep -F -q 'checking\x1b]0;title\x07' || fail "print is not escaped"
echo "spec_text_cli: ok"
