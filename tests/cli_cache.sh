#!/bin/sh
# The compile cache through the command: a second identical plan compiles nothing and takes
# a small fraction of the first; a corrupted entry is detected and recompiled, and the summary
# says truthfully whether it was removed (not in a read-only cache); an entry that is a
# directory or a FIFO is a miss that never blocks; a cache directory that is a file is an error.
#   cli_cache.sh path/to/flashtune
set -u
ft=$1
dir=$(mktemp -d)
trap 'chmod -R u+w "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
only='d=64,bm=64,bn=64,warps=4,dtype=f16,qreg=0'
plan() { "$ft" plan specs/flash_fwd.lua --only "$only" --cache-dir "$dir" -q -j 2 > "$dir/out.txt" 2>&1; }
now() { date +%s%N; }
fail() { cat "$dir/out.txt"; echo "cli_cache: $*"; exit 1; }

t0=$(now); plan || fail "first plan failed"; t1=$(now)
grep -q 'cache: 0 hits, 10 compiled' "$dir/out.txt" || fail "expected 10 compilations"
plan || fail "second plan failed"; t2=$(now)
grep -q 'cache: 10 hits, 0 compiled' "$dir/out.txt" || fail "expected 10 cache hits"
cold=$(( (t1 - t0) / 1000000 )); warm=$(( (t2 - t1) / 1000000 ))
echo "cold ${cold} ms, warm ${warm} ms"
[ $((warm * 5)) -lt "$cold" ] || { echo "the warm plan is not under a fifth of the cold one"; exit 1; }

entry=$(find "$dir" -name '*.ftc' | head -n 1)
printf 'XXXX' | dd of="$entry" bs=1 seek=300 conv=notrunc 2>/dev/null
plan || fail "plan after corruption failed"
grep -q 'cache: 9 hits, 1 compiled' "$dir/out.txt" || fail "the corrupt entry was not recompiled"
grep -q 'cache: 1 corrupt entries removed and recompiled' "$dir/out.txt" || fail "corruption not reported"
plan || fail "plan after the recompilation failed"
grep -q 'cache: 10 hits, 0 compiled' "$dir/out.txt" || fail "the recompiled entry was not stored"
echo "corrupt entry removed and recompiled: ok"

# A read-only cache: the corrupt entry is recompiled but stays, and the summary says so. (Root
# writes anywhere: as root the plan runs as nobody, for whom the cache is read-only.)
printf 'XXXX' | dd of="$entry" bs=1 seek=300 conv=notrunc 2>/dev/null
before=$(cksum < "$entry")
chmod 755 "$dir"
if [ "$(id -u)" = 0 ]; then
  as_reader() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
else
  chmod -R a-w "$dir"
  as_reader() { "$@"; }
fi
as_reader "$ft" plan specs/flash_fwd.lua --only "$only" --cache-dir "$dir" -q -j 2 > "$dir/ro.txt" 2>&1
rc=$?
chmod -R u+w "$dir"
cp "$dir/ro.txt" "$dir/out.txt"
[ $rc -eq 0 ] || fail "the plan with a read-only cache failed"
grep -q 'cache: 9 hits, 1 compiled' "$dir/out.txt" || fail "read-only: the corrupt entry was not recompiled"
grep -q 'cache: 1 corrupt entries recompiled; 0 removed, 1 could not be (is the cache read-only?)' "$dir/out.txt" ||
  fail "read-only: the summary does not say that the corrupt entry stayed"
grep -q 'removed and recompiled' "$dir/out.txt" && fail "read-only: the summary claims a removal"
[ "$(cksum < "$entry")" = "$before" ] || fail "read-only: the entry changed"
echo "read-only cache: corrupt entry kept and said so: ok"

# An entry that is a directory (cannot be removed) or a FIFO (must not be opened): misses.
rm -f "$entry"
mkdir "$entry"
other=$(find "$dir" -name '*.ftc' -type f | head -n 1)
rm -f "$other"
mkfifo "$other"
timeout 120 "$ft" plan specs/flash_fwd.lua --only "$only" --cache-dir "$dir" -q -j 2 > "$dir/out.txt" 2>&1 ||
  fail "plan with a directory and a FIFO for entries failed or blocked"
grep -q 'cache: 8 hits, 2 compiled' "$dir/out.txt" || fail "expected 2 compilations"
grep -q 'cache: 2 corrupt entries recompiled; 1 removed, 1 could not be' "$dir/out.txt" || fail "directory and FIFO: wrong counts"
[ -d "$entry" ] || fail "the directory at an entry's name is gone"
[ -f "$other" ] || fail "the FIFO was not replaced by the recompiled entry"
echo "entries that are a directory and a FIFO: ok"

# A cache directory that is a file: an error naming it, the file untouched.
printf 'not a cache\n' > "$dir/file"
"$ft" plan specs/flash_fwd.lua --only "$only" --cache-dir "$dir/file" -q -j 2 > "$dir/out.txt" 2>&1 &&
  fail "plan with a file for the cache directory succeeded"
grep -q "compile cache: $dir/file is not a directory" "$dir/out.txt" || fail "no clear message for a file as the cache"
[ "$(cat "$dir/file")" = 'not a cache' ] || fail "the file given as the cache changed"
echo "cache ok"
