#!/bin/sh
# Kernel packs end to end, no GPU needed: a tune with the stand-in worker fills a database
# (real sm_90 cubins from NVRTC), export, import into a fresh database, damaged packs, packs
# of other devices, --verify, and the C export compiled into a program.
#   pack.sh path/to/flashtune path/to/fake_worker path/to/cc path/to/libflashtune.so
set -u
ft=$1
fake=$2
cc=$3
lib=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export FLASHTUNE_WORKER=$fake   # the GPU "here", for tune and import, on any machine
db=$dir/tuned.db
only='d=64,bm=64,bn=64,warps=4,dtype=f16'   # as tune_fake.sh: 20 variants, 12 buckets
fail() { echo "pack: $*"; [ -f "$dir/out" ] && cat "$dir/out"; exit 1; }
sum() { cksum < "$1"; }
has_gpu() { [ -e /dev/nvidiactl ]; }
# sqlite3 DB SQL: the sqlite3 shell's output (rows with '|' between values), or the same from
# Python's sqlite3 module where the shell is missing (as on the GPU machine).
if ! command -v sqlite3 >/dev/null 2>&1; then
  sqlite3() {
    python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
cur = None
for stmt in [s for s in sys.argv[2].split(";") if s.strip()]:
    cur = c.execute(stmt)
for row in (cur.fetchall() if cur is not None else []):
    print("|".join("" if v is None else str(v) for v in row))' "$@"
  }
fi

"$ft" tune specs/flash_fwd.lua --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 || fail "the tune failed"
[ "$(sqlite3 "$db" 'select count(*) from v_winners')" = 12 ] || fail "the tune left no 12 winners"

# 1. Export: a pack, its header, a summary.
"$ft" export --db "$db" --out "$dir/fake.ftpack" > "$dir/out" 2>&1 || fail "export failed"
grep -q 'exported 12 buckets (.* kernels, .* bytes of cubins) of Fake GPU (cc 9.0, driver 13000, NVRTC' "$dir/out" ||
  fail "export: unexpected summary"
head -c 9 "$dir/fake.ftpack" | grep -q '^FTPACK 1 ' || fail "the pack does not start with its magic"
"$ft" export --db "$db" --device "no such gpu" --out "$dir/x.ftpack" > "$dir/out" 2>&1 && fail "export of an unknown device succeeded"
grep -q "no device matching 'no such gpu' has winners" "$dir/out" || fail "export: no clear message for an unknown device"
[ -e "$dir/x.ftpack" ] && fail "a failed export left a file"
"$ft" export --db "$db" > "$dir/out" 2>&1 && fail "export without --out succeeded"
echo "export: ok"

# 2. Round trip: import into a fresh database gives the same winners, to the last bit.
new=$dir/new.db
"$ft" import "$dir/fake.ftpack" --db "$new" > "$dir/out" 2>&1 || fail "import failed"
grep -q 'every checksum matches' "$dir/out" || fail "import did not report its checks"
grep -q 'imported 12 winners (.* kernels) of Fake GPU into .*: 12 now win their bucket' "$dir/out" ||
  fail "import: unexpected summary"
"$ft" query --db "$db" --json > "$dir/a" 2>&1 || fail "query of the tuned database failed"
"$ft" query --db "$new" --json > "$dir/b" 2>&1 || fail "query of the imported database failed"
[ "$(wc -l < "$dir/a")" = 12 ] || fail "expected 12 winners from query"
cmp -s "$dir/a" "$dir/b" || { diff "$dir/a" "$dir/b"; fail "query shows other winners after the round trip"; }
exact="select dtype, head_dim, causal, seqlen_bucket, bh_bucket, variant, printf('%.16e %.16e %.16e %.16e',
  median_ms, iqr_ms, tflops, max_error), repetitions, measured_at, batch, heads_q, heads_kv, seqlen_q, seqlen_k
  from v_winners order by dtype, head_dim, causal, seqlen_bucket, bh_bucket"
[ "$(sqlite3 "$db" "$exact")" = "$(sqlite3 "$new" "$exact")" ] || fail "the winners' values differ after the round trip"
nk=$(sqlite3 "$new" 'select count(*) from kernels')
same=$(sqlite3 "$new" "attach '$db' as o; select count(*) from kernels k join o.kernels t
  on t.source_hash = k.source_hash and t.arch = k.arch where k.cubin = t.cubin and k.source = t.source
  and k.entry = t.entry and k.threads = t.threads and k.smem_dynamic = t.smem_dynamic")
[ "$nk" -gt 0 ] && [ "$same" = "$nk" ] || fail "the imported kernels' cubins or sources differ ($same of $nk match)"
"$ft" import "$dir/fake.ftpack" --db "$new" -q > "$dir/out" 2>&1 || fail "importing twice failed"
[ "$(sqlite3 "$new" 'select count(*) from results')" = 12 ] || fail "importing twice duplicated results"
"$ft" export --db "$new" --out "$dir/again.ftpack" -q > "$dir/out" 2>&1 || fail "export of the imported database failed"
"$ft" import "$dir/again.ftpack" --dry-run > "$dir/c" 2>&1 || fail "dry run failed"
"$ft" import "$dir/fake.ftpack" --dry-run > "$dir/d" 2>&1 || fail "dry run failed"
[ "$(tail -n +2 "$dir/c")" = "$(tail -n +2 "$dir/d")" ] || fail "a pack of the imported database differs"
echo "round trip (query --json and every stored value identical): ok"

# 3. Damaged packs: a clear FT_ERR_CORRUPT-style message, the database untouched, and no
#    database created where there was none.
size=$(wc -c < "$dir/fake.ftpack")
before=$(sum "$new")
flip() { # flip.sh-free: rewrite one byte at offset $2 with another value
  cp "$1" "$3"
  old=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $(( (old + 1) % 256 )))" | dd of="$3" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
check_refused() { # file, regex, what
  "$ft" import "$1" --db "$new" > "$dir/out" 2>&1; rc=$?
  [ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "$3: import exited $rc"
  grep -E -q "$2" "$dir/out" || fail "$3: no clear message"
  [ "$(sum "$new")" = "$before" ] || fail "$3: the database changed"
  "$ft" import "$1" --db "$dir/fresh.db" > /dev/null 2>&1 && fail "$3: accepted into a fresh database"
  [ -e "$dir/fresh.db" ] && fail "$3: a database was created"
  return 0
}
flip "$dir/fake.ftpack" $((size - 10)) "$dir/bad1.ftpack"     # in the last source
check_refused "$dir/bad1.ftpack" "corrupt flashtune pack: the sha256 of its content" "a flipped byte in a blob"
flip "$dir/fake.ftpack" 200 "$dir/bad2.ftpack"                # in the index
check_refused "$dir/bad2.ftpack" "corrupt flashtune pack" "a flipped byte in the index"
flip "$dir/fake.ftpack" 20 "$dir/bad3.ftpack"                 # in the header's sizes or checksum
check_refused "$dir/bad3.ftpack" "corrupt flashtune pack" "a flipped byte in the header"
head -c $((size - 1000)) "$dir/fake.ftpack" > "$dir/short.ftpack"
check_refused "$dir/short.ftpack" "corrupt flashtune pack: its header announces $size bytes, the file has $((size - 1000)) \(truncated\)" "a truncated pack"
{ cat "$dir/fake.ftpack"; printf 'x'; } > "$dir/long.ftpack"
check_refused "$dir/long.ftpack" "extra bytes at the end" "a pack with a byte appended"
{ printf 'XTPACK'; tail -c +7 "$dir/fake.ftpack"; } > "$dir/magic.ftpack"
check_refused "$dir/magic.ftpack" "is not a flashtune pack" "a wrong magic"
{ printf 'FTPACK 9'; tail -c +9 "$dir/fake.ftpack"; } > "$dir/v9.ftpack"
check_refused "$dir/v9.ftpack" "format version 9; this flashtune .* reads version 1" "an unknown version"
: > "$dir/empty.ftpack"
check_refused "$dir/empty.ftpack" "is not a flashtune pack" "an empty file"
check_refused "$dir/none.ftpack" "none.ftpack" "a missing file"
echo "damaged packs refused, database untouched: ok"

# 4. Another GPU model or driver: refused, naming both; --force imports it for this GPU.
export FAKE_DEVICE="Other GPU"
check_refused "$dir/fake.ftpack" \
  "tuned on Fake GPU \(cc 9.0.*driver 13000.*GPU 0 here is Other GPU \(cc 9.0.*another GPU model.*--force" \
  "a pack of another model"
unset FAKE_DEVICE
export FAKE_DRIVER=12080
check_refused "$dir/fake.ftpack" "GPU 0 here is Fake GPU .*driver 12080.*another driver" "a pack of another driver"
unset FAKE_DRIVER
FAKE_DEVICE="Other GPU" "$ft" import "$dir/fake.ftpack" --db "$new" --force > "$dir/out" 2>&1 ||
  fail "--force did not import the other model's pack"
grep -q 'warning: .*tuned on Fake GPU.*Other GPU.*because of --force' "$dir/out" || fail "--force gave no warning"
"$ft" query --db "$new" --device "Other GPU" > "$dir/out" 2>&1 || fail "query after --force failed"
grep -q '^12 rows from' "$dir/out" || fail "--force: the winners are not recorded for the GPU here"
before=$(sum "$new")
FAKE_CC=80 FAKE_DEVICE="Old GPU" "$ft" import "$dir/fake.ftpack" --db "$new" --force > "$dir/out" 2>&1 &&
  fail "a pack for another compute capability was forced in"
grep -q 'cannot run on compute capability 8.0 (not even with --force)' "$dir/out" || fail "no clear message for cc 8.0"
[ "$(sum "$new")" = "$before" ] || fail "the refused cc 8.0 import changed the database"
echo "other devices refused, --force: ok"

# 5. --verify runs every kernel on the GPU: without one it fails, and writes nothing.
if ! has_gpu; then
  "$ft" import "$dir/fake.ftpack" --db "$new" --verify > "$dir/out" 2>&1 && fail "--verify passed without a GPU"
  grep -q -- '--verify needs a GPU to run the kernels on: ' "$dir/out" || fail "--verify: no clear message"
  grep -q 'nothing was imported' "$dir/out" || fail "--verify: does not say that nothing was imported"
  [ "$(sum "$new")" = "$before" ] || fail "--verify without a GPU changed the database"
  env -u FLASHTUNE_WORKER "$ft" import "$dir/fake.ftpack" --db "$dir/nogpu.db" > "$dir/out" 2>&1 ||
    fail "import without a GPU failed"
  grep -q 'no GPU here to compare with' "$dir/out" || fail "import without a GPU does not say so"
  echo "--verify without a GPU: ok"
else
  "$ft" import "$dir/fake.ftpack" --db "$dir/verified.db" --verify > "$dir/out" 2>&1 || fail "--verify failed on the GPU"
  [ "$(grep -c '  verified ' "$dir/out")" = 12 ] || fail "--verify did not verify 12 winners"
  echo "--verify on the GPU: ok"
fi

# 6. The C export, compiled into a program that reads the table: the same content as the pack.
"$ft" export --db "$db" --format c --out "$dir/fake_kernels.c" > "$dir/out" 2>&1 || fail "export --format c failed"
grep -q 'as C: const ft_kernel_set fake_kernels' "$dir/out" || fail "export --format c: unexpected summary"
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic ${FT_SANITIZE_FLAGS:-} -Iinclude -I. -DKERNEL_SET=fake_kernels -o "$dir/pack_table" \
  tests/pack_table_main.c "$dir/fake_kernels.c" common/sha256.c "$lib" -Wl,-rpath,"$(dirname "$lib")" \
  > "$dir/out" 2>&1 || fail "the generated C source does not compile and link"
"$dir/pack_table" list > "$dir/table" 2> "$dir/out" || fail "the table fails its checks"
head -n 1 "$dir/table" | grep -q '^device Fake GPU cc 90 sms 132 driver 13000 nvrtc ' || fail "the table's device is wrong"
[ "$(tail -n +2 "$dir/table")" = "$(tail -n +2 "$dir/d")" ] || { diff "$dir/table" "$dir/d"; fail "the C table differs from the pack"; }
[ "$(tail -n +2 "$dir/table" | wc -l)" = 12 ] || fail "the C table does not hold 12 entries"
"$dir/pack_table" context > "$dir/out" 2>&1 || fail "the program failed"
if has_gpu; then
  grep -q '^FT_OK' "$dir/out" || fail "ft_context_create with the compiled-in set failed on the GPU"
else
  grep -E -q '^FT_ERR_NO_(DRIVER|DEVICE): ' "$dir/out" || fail "ft_context_create with the compiled-in set: $(cat "$dir/out")"
fi
"$ft" export --db "$db" --format c --name 9bad --out "$dir/y.c" > "$dir/out" 2>&1 && fail "--name 9bad was accepted"
echo "C export compiled into a program: ok"
