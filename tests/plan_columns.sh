#!/bin/sh
# The plan table's columns line up for variants longer than the default width: the status of
# every row starts where the header's does (flash_bwd_sm90's variant strings are 80 characters).
#   plan_columns.sh path/to/flashtune
set -u
ft=$1
out=$("$ft" plan specs/flash_bwd_sm90.lua --arch sm_90a --only d=256,causal=1,dtype=bf16 -q -j 2) ||
  { echo "plan_columns: plan failed"; exit 1; }
printf '%s\n' "$out" | awk '
  NR == 1 { col = index($0, " status ") + 1; next }
  /^d=/ { n++; s = $2; at = index($0, " " s " ") + 1
          if (at != col && !bad) { printf "plan_columns: row %d: %s at column %d, the header'"'"'s status at %d\n", NR, s, at, col; bad = 1 } }
  END { if (bad) exit 1; if (n < 2) { print "plan_columns: fewer than two rows"; exit 1 }; print "plan columns: ok" }'
