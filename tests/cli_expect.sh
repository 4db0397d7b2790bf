#!/bin/sh
# Runs a command and checks how it ended:
#   cli_expect.sh fail 'regex' -- cmd args...   non-zero exit (not a signal), output matches
#   cli_expect.sh ok   'regex' -- cmd args...   zero exit, output matches
# "Output" is stdout and stderr together. A crash (exit status over 128) always fails.
want=$1; regex=$2; shift 2
[ "$1" = "--" ] && shift
out=$("$@" 2>&1); rc=$?
printf '%s\n' "$out"
if [ $rc -gt 128 ]; then echo "cli_expect: crashed (status $rc)"; exit 1; fi
case $want in
  fail) [ $rc -ne 0 ] || { echo "cli_expect: expected a non-zero exit, got 0"; exit 1; } ;;
  ok)   [ $rc -eq 0 ] || { echo "cli_expect: expected exit 0, got $rc"; exit 1; } ;;
esac
printf '%s\n' "$out" | grep -E -q -- "$regex" || { echo "cli_expect: output does not match /$regex/"; exit 1; }
echo "cli_expect: ok (status $rc)"
