#!/bin/sh
# The compile cache through the command: a second identical plan compiles nothing and takes
# a small fraction of the first; a corrupted entry is detected and recompiled.
#   cli_cache.sh path/to/flashtune
set -u
ft=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
only='d=64,bm=64,bn=64,warps=4,dtype=f16,qreg=0'
plan() { "$ft" plan specs/flash_fwd.lua --only "$only" --cache-dir "$dir" -q -j 2 > "$dir/out.txt" 2>&1; }
now() { date +%s%N; }

t0=$(now); plan || { cat "$dir/out.txt"; echo "first plan failed"; exit 1; }; t1=$(now)
grep -q 'cache: 0 hits, 10 compiled' "$dir/out.txt" || { cat "$dir/out.txt"; echo "expected 10 compilations"; exit 1; }
plan || { cat "$dir/out.txt"; echo "second plan failed"; exit 1; }; t2=$(now)
grep -q 'cache: 10 hits, 0 compiled' "$dir/out.txt" || { cat "$dir/out.txt"; echo "expected 10 cache hits"; exit 1; }
cold=$(( (t1 - t0) / 1000000 )); warm=$(( (t2 - t1) / 1000000 ))
echo "cold ${cold} ms, warm ${warm} ms"
[ $((warm * 5)) -lt "$cold" ] || { echo "the warm plan is not under a fifth of the cold one"; exit 1; }

entry=$(find "$dir" -name '*.ftc' | head -n 1)
printf 'XXXX' | dd of="$entry" bs=1 seek=300 conv=notrunc 2>/dev/null
plan || { cat "$dir/out.txt"; echo "plan after corruption failed"; exit 1; }
grep -q 'cache: 9 hits, 1 compiled' "$dir/out.txt" || { cat "$dir/out.txt"; echo "the corrupt entry was not recompiled"; exit 1; }
grep -q 'corrupt entries were removed and recompiled' "$dir/out.txt" || { cat "$dir/out.txt"; echo "corruption not reported"; exit 1; }
echo "cache ok"
