#!/bin/sh
# The command's database paths and its output, end to end, no GPU needed (the stand-in
# worker): --db names that keep nothing, directories and FIFOs where a database should be, a
# WAL database in a directory the reader cannot write, and output that cannot be written.
#   db_cli.sh path/to/flashtune path/to/fake_worker
set -u
ft=$1
export FLASHTUNE_WORKER=$2   # the GPU "here", for tune, on any machine
dir=$(mktemp -d)
trap 'chmod -R u+w "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
db=$dir/tuned.db
only='d=64,bm=64,bn=64,warps=4,dtype=f16'   # as tune_fake.sh: 20 variants, 12 buckets
variant='d=128,bm=128,bn=64,warps=4,stages=1,causal=0,dtype=f16,qreg=0,overlap=0'
fail() { echo "db_cli: $*"; [ -f "$dir/out" ] && cat "$dir/out"; exit 1; }
# expect WANT REGEX CMD...: runs CMD (stdout and stderr to $dir/out); its exit status must be
# WANT (a number, or 'fail' for any non-zero status that is no crash) and its output match REGEX.
expect() {
  want=$1 regex=$2
  shift 2
  "$@" > "$dir/out" 2>&1
  rc=$?
  case $want in
    fail) [ $rc -ne 0 ] && [ $rc -lt 124 ] || fail "$*: exit status $rc, expected a failure" ;;
    *) [ $rc -eq "$want" ] || fail "$*: exit status $rc, expected $want" ;;
  esac
  grep -E -q -- "$regex" "$dir/out" || fail "$*: the output does not match /$regex/"
}

"$ft" tune specs/flash_fwd.lua --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 || fail "the tune failed"
"$ft" export --db "$db" --out "$dir/fake.ftpack" > "$dir/out" 2>&1 || fail "export failed"

# 1. Names SQLite would open as a temporary or in-memory database, or as a URI: refused before
#    anything is measured or imported (exit status 2, as for any bad argument).
for name in "" ":memory:" "file:$dir/u.db?mode=memory"; do
  expect 2 "the tuning database path .*(empty|keeps nothing|reads as a URI)" \
    "$ft" tune specs/flash_fwd.lua --db "$name" --only "$only" -q -j 2
  grep -q "measured" "$dir/out" && fail "tune --db '$name' measured"
  expect 2 "the tuning database path" "$ft" import "$dir/fake.ftpack" --db "$name"
  grep -q "imported" "$dir/out" && fail "import --db '$name' imported"
  expect 2 "the tuning database path" "$ft" query --db "$name"
done
[ -e "$dir/u.db" ] && fail "a file: URI made a file"
# an empty $FLASHTUNE_DB is as if it were unset: the default path under $XDG_DATA_HOME
expect fail "cannot open tuning database $dir/xdg/flashtune/tuning.db: no such file" \
  env FLASHTUNE_DB= XDG_DATA_HOME="$dir/xdg" "$ft" query
expect 2 "FLASHTUNE_DB is ':memory:'" env FLASHTUNE_DB=:memory: "$ft" query
echo "names: ok"

# 2. A directory, a FIFO (which SQLite would wait on for ever), side files that are not files.
mkdir "$dir/a_dir"
expect fail "tuning database $dir/a_dir: a directory, not a regular file" "$ft" query --db "$dir/a_dir"
expect fail "tuning database $dir/a_dir: a directory, not a regular file" \
  "$ft" tune specs/flash_fwd.lua --db "$dir/a_dir" --only "$only" -q -j 2
mkfifo "$dir/fifo"
expect fail "tuning database $dir/fifo: a FIFO, not a regular file" timeout 20 "$ft" query --db "$dir/fifo"
expect fail "a FIFO, not a regular file" timeout 20 "$ft" import "$dir/fake.ftpack" --db "$dir/fifo"
expect fail "a FIFO, not a regular file" timeout 20 "$ft" devices --db "$dir/fifo"
# no database yet (a fresh machine): said, with what makes one, and not a failure
expect 0 "tuning database: none yet at $dir/none.db \(\`flashtune tune\` makes one" "$ft" devices --db "$dir/none.db"
"$ft" devices --db "$dir/none.db" --json 2>&1 | grep -q '"kind": "database", "path": ".*none.db", "exists": false' ||
  fail "devices --json without a database"
[ -e "$dir/none.db" ] && fail "devices made a database"
expect fail "no such file \(\`flashtune tune\` makes one, \`flashtune import\` brings one from a pack\)" \
  "$ft" query --db "$dir/none.db"
[ -p "$dir/fifo" ] || fail "the FIFO is gone"
side=$dir/side.db
cp "$db" "$side"
mkdir "$side-wal"
expect fail "tuning database $side: $side-wal: a directory, not a regular file" "$ft" query --db "$side"
rmdir "$side-wal"
expect 0 "12 rows from $side" "$ft" query --db "$side"
echo "files: ok"

# 3. A WAL database in a directory the reader cannot write: read as it is, nothing written
#    beside it; a tune into it is refused. Root ignores permissions: then the reader is nobody.
mkdir "$dir/ro"
cp "$db" "$dir/ro/t.db"
chmod 755 "$dir"
chmod 644 "$dir/ro/t.db"
chmod 555 "$dir/ro"
as_reader=
if [ "$(id -u)" = 0 ]; then
  if command -v setpriv > /dev/null 2>&1 && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    as_reader="setpriv --reuid=65534 --regid=65534 --clear-groups"
  else
    as_reader=skip
  fi
fi
if [ "$as_reader" = skip ]; then
  echo "read-only directory: skipped (running as root, and setpriv cannot drop to uid 65534)"
else
  expect 0 "12 rows from $dir/ro/t.db" $as_reader "$ft" query --db "$dir/ro/t.db"
  expect 0 '"winner": true' $as_reader "$ft" query --db "$dir/ro/t.db" --json
  mkdir "$dir/cache" && chmod 777 "$dir/cache"
  expect fail "cannot write tuning database $dir/ro/t.db: its directory $dir/ro is not writable" \
    $as_reader env FLASHTUNE_CACHE_DIR="$dir/cache" "$ft" tune specs/flash_fwd.lua --db "$dir/ro/t.db" \
    --only "$only" -q -j 2
  [ "$(ls "$dir/ro")" = t.db ] || fail "something was written beside the read-only database: $(ls "$dir/ro")"
  echo "read-only directory: ok"
fi
chmod 755 "$dir/ro"

# 4. Output that cannot be written (a full disk): a failure with the reason, not exit status 0.
if [ -c /dev/full ]; then
  full() {
    "$@" > /dev/null 2> "$dir/out" || fail "$* > /dev/null failed: $(cat "$dir/out")"
    "$@" > /dev/full 2> "$dir/out"
    rc=$?
    [ $rc -eq 1 ] || fail "$* > /dev/full: exit status $rc, expected 1"
    grep -q "writing the .* failed: No space left on device" "$dir/out" || fail "$* > /dev/full: no clear message"
  }
  full "$ft" version
  full "$ft" --help
  full "$ft" gen specs/flash_fwd.lua --variant "$variant"
  full "$ft" query --db "$db"
  full "$ft" query --db "$db" --json
  full "$ft" query --db "$db" --all
  full "$ft" devices --db "$db"
  full "$ft" plan specs/flash_fwd.lua --only "$only,stages=1,causal=0" --json -q
  full "$ft" import "$dir/fake.ftpack" --db "$dir/new.db" --dry-run
  [ -e "$dir/new.db" ] && fail "import --dry-run made a database"
  # gen -o: devices are written as streams (checked), files atomically
  expect 1 "cannot write /dev/full: No space left on device" "$ft" gen specs/flash_fwd.lua --variant "$variant" -o /dev/full
  "$ft" gen specs/flash_fwd.lua --variant "$variant" -o "$dir/k.cu" > "$dir/out" 2>&1 || fail "gen -o FILE failed"
  "$ft" gen specs/flash_fwd.lua --variant "$variant" | cmp -s - "$dir/k.cu" || fail "gen -o wrote another source"
  echo "output errors: ok"
else
  echo "output errors: skipped (no /dev/full here)"
fi
echo "db_cli: ok"
