#!/bin/sh
# Kernel packs end to end, no GPU needed: a tune with the stand-in worker fills a database
# (real sm_90 cubins from NVRTC), export, import into a fresh database, damaged packs, packs
# of other devices, --verify, the C export compiled into a program, hostile packs (an edited
# index with its checksum recomputed) refused with the database untouched, a hostile device
# name exported as C that compiles to the set alone, and an export of a database holding
# results import would refuse.
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
# The index of a pack (its header's third field is the index's size).
index_of() { h=$(head -n 1 "$1"); tail -c +$(( ${#h} + 2 )) "$1" | head -c "$(echo "$h" | cut -d' ' -f3)"; }
# repack IN OUT SED-EXPRESSION: the index edited by sed, the header's sizes and sha256
# recomputed, as someone editing a pack by hand would.
repack() {
  h=$(head -n 1 "$1")
  hl=$(( ${#h} + 1 ))
  il=$(echo "$h" | cut -d' ' -f3)
  tail -c +$((hl + 1)) "$1" | head -c "$il" | sed -e "$3" > "$2.index"
  tail -c +$((hl + il + 1)) "$1" > "$2.blobs"
  s=$(cat "$2.index" "$2.blobs" | sha256sum | cut -d' ' -f1)
  { printf 'FTPACK 3 %s %s %s\n' "$(wc -c < "$2.index" | tr -d ' ')" "$(wc -c < "$2.blobs" | tr -d ' ')" "$s"
    cat "$2.index" "$2.blobs"; } > "$2"
  rm -f "$2.index" "$2.blobs"
}
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
    print("|".join("" if v is None else str(v) for v in row))
c.commit()' "$@"
  }
fi

"$ft" tune specs/flash_fwd.lua --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 || fail "the tune failed"
[ "$(sqlite3 "$db" 'select count(*) from v_winners')" = 12 ] || fail "the tune left no 12 winners"

# 1. Export: a pack, its header, a summary.
"$ft" export --db "$db" --out "$dir/fake.ftpack" > "$dir/out" 2>&1 || fail "export failed"
grep -q 'exported 12 buckets (.* kernels, .* bytes of cubins) of Fake GPU (cc 9.0, driver 13000, NVRTC' "$dir/out" ||
  fail "export: unexpected summary"
head -c 9 "$dir/fake.ftpack" | grep -q '^FTPACK 3 ' || fail "the pack does not start with its magic"
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
# --json: one line, the pack's with --dry-run, the import's otherwise (a database of its own)
"$ft" import "$dir/fake.ftpack" --dry-run --json > "$dir/out" 2>&1 || fail "import --dry-run --json failed"
[ "$(wc -l < "$dir/out")" = 1 ] && grep -q '^{"kind": "pack", "file": ".*fake.ftpack", "buckets": 12, "kernels": [0-9]*, "device": "Fake GPU", .*"checksums": "match"}$' "$dir/out" ||
  fail "import --dry-run --json: $(cat "$dir/out")"
"$ft" import "$dir/fake.ftpack" --db "$dir/json.db" --json > "$dir/out" 2>&1 || fail "import --json failed"
[ "$(wc -l < "$dir/out")" = 1 ] && grep -q '^{"kind": "import", "file": ".*fake.ftpack", "db": ".*json.db", "device": "Fake GPU", "winners": 12, "kernels": [0-9]*, "winning": 12, "verified": false, "recorded_for": "this GPU"}$' "$dir/out" ||
  fail "import --json: $(cat "$dir/out")"
# (the tune's decisions stay with its database: a pack carries winners, and an imported one wins
# its bucket by its figure; so "preferred" is left out of the comparison)
"$ft" query --db "$db" --json | sed 's/"preferred": [a-z]*, //' > "$dir/a" 2>&1 || fail "query of the tuned database failed"
"$ft" query --db "$new" --json | sed 's/"preferred": [a-z]*, //' > "$dir/b" 2>&1 || fail "query of the imported database failed"
grep -q '"preferred"' "$dir/a" && fail "the comparison still holds the decisions"
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
check_refused "$dir/v9.ftpack" "format version 9; this flashtune .* reads versions 1 to 3" "an unknown version"
: > "$dir/empty.ftpack"
check_refused "$dir/empty.ftpack" "is not a flashtune pack" "an empty file"
check_refused "$dir/none.ftpack" "none.ftpack" "a missing file"
check_refused "$dir" "$dir: a directory, not a regular file" "a directory"
mkfifo "$dir/fifo"
check_refused "$dir/fifo" "fifo: a FIFO, not a regular file" "a FIFO"
echo "damaged packs refused, database untouched: ok"

# 3b. Hostile packs: consistent checksums, content import must not trust.
h0=$(index_of "$dir/fake.ftpack" | grep -o '"source_hash": "[0-9a-f]*"' | sed -n 1p)
h1=$(index_of "$dir/fake.ftpack" | grep -o '"source_hash": "[0-9a-f]*"' | sed -n 2p)
[ -n "$h0" ] && [ -n "$h1" ] || fail "the pack has fewer than two kernels"
repack "$dir/fake.ftpack" "$dir/claim.ftpack" "s/$h1/$h0/"
check_refused "$dir/claim.ftpack" "corrupt flashtune pack: kernel 1 .*its source_hash .* is not the sha256 of its source" \
  "a kernel claiming another's source hash"
repack "$dir/fake.ftpack" "$dir/d128.ftpack" 's/"d":64/"d":128/'
check_refused "$dir/d128.ftpack" "winner 0 .*its variant computes d=64 causal=. f16, not d=128" "a d=64 kernel as a d=128 winner"
repack "$dir/fake.ftpack" "$dir/cc80.ftpack" 's/"cc": 90/"cc": 80/; s/"arch": "sm_90"/"arch": "sm_80"/'
check_refused "$dir/cc80.ftpack" "kernel 0 .*its cubin is for sm_90, not for compute capability 8.0" "sm_90 cubins in a pack for 8.0"
repack "$dir/fake.ftpack" "$dir/dup.ftpack" 's/"format": "flashtune-pack"/"format": "x", "format": "flashtune-pack"/'
check_refused "$dir/dup.ftpack" "its index is not valid JSON \(a duplicate key \"format\"" "a duplicate key"
repack "$dir/fake.ftpack" "$dir/overlap.ftpack" '0,/"source": {"offset": [0-9]*/s//"source": {"offset": 0/'
check_refused "$dir/overlap.ftpack" "the source starts at byte 0 of the blobs, not at" "a source overlapping a cubin"
# Kernel 0's cubin changed (its last byte, in the program headers: still an ELF image for
# sm_90 defining its entry) and its sha256 with it: a valid pack, but the database here holds
# that kernel with its own cubin, which a pack never replaces.
hl=$(( $(head -n 1 "$dir/fake.ftpack" | wc -c) ))
il=$(head -n 1 "$dir/fake.ftpack" | cut -d' ' -f3)
cs=$(index_of "$dir/fake.ftpack" | grep -o '"cubin": {"offset": 0, "size": [0-9]*' | grep -o '[0-9]*$')
old_sha=$(tail -c +$((hl + il + 1)) "$dir/fake.ftpack" | head -c "$cs" | sha256sum | cut -d' ' -f1)
flip "$dir/fake.ftpack" $((hl + il + cs - 1)) "$dir/swap0.ftpack"
new_sha=$(tail -c +$((hl + il + 1)) "$dir/swap0.ftpack" | head -c "$cs" | sha256sum | cut -d' ' -f1)
repack "$dir/swap0.ftpack" "$dir/swap.ftpack" "s/$old_sha/$new_sha/"
"$ft" import "$dir/swap.ftpack" --db "$new" > "$dir/out" 2>&1 && fail "a pack replacing a local kernel's cubin was imported"
grep -q "swap.ftpack is refused, nothing was imported: kernel 0 of the pack (flash_fwd_sm80 .*) has the source hash and target of kernel .*, but its cubin there is another.*a pack never replaces a kernel of the database" "$dir/out" ||
  fail "a pack replacing a local kernel's cubin: no clear message"
[ "$(sum "$new")" = "$before" ] || fail "the refused cubin replacement changed the database"
"$ft" import "$dir/swap.ftpack" --db "$dir/swap.db" -q > "$dir/out" 2>&1 || fail "the same pack into a fresh database failed"
rm -f "$dir/swap.db"
echo "hostile packs refused, database untouched: ok"

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
"$ft" export --db "$db" --format c --name while --out "$dir/y.c" > "$dir/out" 2>&1 && fail "--name while was accepted"
grep -q "\-\-name 'while' cannot name the kernel set: it is a keyword of C" "$dir/out" || fail "--name while: no clear message"
"$ft" export --db "$db" --format c --out "$dir/int.c" > "$dir/out" 2>&1 && fail "--out int.c was accepted"
grep -q "the file name $dir/int.c gives the C name 'int', which cannot name the kernel set (it is a keyword of C): choose one with --name SYMBOL" "$dir/out" ||
  fail "--out int.c: no clear message"
"$ft" export --db "$db" --format c --out "$dir/size_t.c" > "$dir/out" 2>&1 && fail "--out size_t.c was accepted"
[ -e "$dir/int.c" ] || [ -e "$dir/y.c" ] || [ -e "$dir/size_t.c" ] && fail "a refused C export left a file"
"$ft" export --db "$db" --format c --out "$dir/h200-kernels.v2.c" > "$dir/out" 2>&1 || fail "export to h200-kernels.v2.c failed"
grep -q 'as C: const ft_kernel_set h200_kernels$' "$dir/out" || fail "h200-kernels.v2.c does not give the symbol h200_kernels"
echo "C export compiled into a program: ok"

# 7. A hostile device name (imported without a GPU here, so it stays the pack's device): the C
#    export escapes it and compiles, warnings as errors, to the set's symbols alone.
repack "$dir/fake.ftpack" "$dir/name.ftpack" 's|"name": "Fake GPU"|"name": "X */ int injected = 2; /* \\\\ ??/"|'
# (where a GPU is, the stand-in worker plays a GPU of that name, so that the pack is this GPU's)
FAKE_DEVICE='X */ int injected = 2; /* \ ??/' "$ft" import "$dir/name.ftpack" --db "$dir/name.db" -q > "$dir/out" 2>&1 ||
  fail "the hostile name's pack was refused"
"$ft" export --db "$dir/name.db" --format c --out "$dir/hostile_kernels.c" -q > "$dir/out" 2>&1 || fail "export of the hostile name failed"
grep -q 'Pretuned flashtune kernels for X \\x2a\\x2f int injected = 2; \\x2f\\x2a \\x5c \\x3f\\x3f\\x2f (compute' "$dir/hostile_kernels.c" ||
  fail "the hostile name is not escaped in the comment"
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic -Iinclude -c -o "$dir/hostile.o" "$dir/hostile_kernels.c" > "$dir/out" 2>&1 ||
  fail "the C export of a hostile device name does not compile"
nm "$dir/hostile.o" > "$dir/syms" 2> "$dir/out" || fail "nm failed"
[ "$(wc -l < "$dir/syms")" -gt 2 ] || fail "nm lists too few symbols"
grep -v ' hostile_kernels\(_cubin_[0-9]*\|_entries\|_ops\|_keys\)*$' "$dir/syms" > "$dir/out" && fail "the object defines other symbols than the set's"
grep -q ' [RD] hostile_kernels$' "$dir/syms" || fail "the object does not define the set"
echo "C export of a hostile device name: ok"

# 8. A database holding winners import would refuse (a zero median, a bucket that is no power
#    of two): export leaves them out, says how many and why, and its pack imports.
bad=$dir/bad.db
cp "$db" "$bad"
sqlite3 "$bad" "update results set median_ms = 0 where key ->> 'seqlen' = 512 and key ->> 'causal' = 0 and
  status = 'ok' and median_ms = (select min(median_ms) from results where key ->> 'seqlen' = 512 and
  key ->> 'causal' = 0 and status = 'ok');
  update results set key = json_set(key, '$.seqlen', 1000) where key ->> 'seqlen' = 1024 and key ->> 'causal' = 0" ||
  fail "cannot edit the database"
"$ft" export --db "$bad" --out "$dir/bad.ftpack" -q > "$dir/out" 2>&1 || fail "export of a database with refused winners failed"
grep -q 'warning: 2 winners are left out because import would refuse them; the first: .*: it has no positive measured time' "$dir/out" ||
  fail "export does not say which winners it left out"
grep -q 'exported 10 buckets' "$dir/out" || fail "export did not export the 10 other buckets"
"$ft" import "$dir/bad.ftpack" --db "$dir/bad2.db" > "$dir/out" 2>&1 || fail "the pack export wrote is refused by import"
grep -q 'imported 10 winners' "$dir/out" || fail "import of the exported pack: unexpected summary"
"$ft" export --db "$bad" --format c --out "$dir/bad_kernels.c" -q > "$dir/out" 2>&1 || fail "C export of the database failed"
[ "$(grep -c '^    {.dtype' "$dir/bad_kernels.c")" = 10 ] || fail "the C export does not hold the 10 exportable winners"
echo "export leaves out what import refuses: ok"

# 9. A device name with control characters in a database: export refuses the device, and
#    names are shown escaped, never as terminal control sequences.
esc=$(printf '\033')
sqlite3 "$bad" "update devices set name = 'Fake' || char(27) || '[31mGPU'" || fail "cannot edit the database"
"$ft" export --db "$bad" --out "$dir/esc.ftpack" > "$dir/out" 2>&1 && fail "a device name with control characters was exported"
grep -q 'device 1 cannot be exported: the device.s name is empty or holds control characters' "$dir/out" ||
  fail "export of a device name with control characters: no clear message"
"$ft" export --db "$bad" --device nothing --out "$dir/esc.ftpack" > "$dir/out" 2>&1 && fail "export of no device succeeded"
grep -q 'Fake\\x1b\[31mGPU, cc 90,' "$dir/out" || fail "the device list does not show the name escaped"
grep -q "$esc" "$dir/out" && fail "the device list shows a control character"
[ -e "$dir/esc.ftpack" ] && fail "a refused export left a file"
echo "names with control characters: ok"
