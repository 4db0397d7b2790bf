#!/bin/sh
# Misses end to end without a GPU: misses in a database (as the runtime library records them
# with FLASHTUNE_RECORD_MISSES=1), `flashtune query --misses`, and `flashtune tune --misses`
# with the stand-in worker (tests/fake_worker.c).
#   tune_misses.sh path/to/flashtune path/to/fake_worker
set -u
ft=$1
export FLASHTUNE_WORKER=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
db=$dir/tuning.db
only='d=64,bm=64,bn=64,warps=4,dtype=f16'   # 20 compiled variants
fail() { echo "tune_misses: $*"; [ -f "$dir/out" ] && cat "$dir/out"; exit 1; }
sql() { sqlite3 "$db" "$1"; }

# 1. Nothing recorded: tune --misses says so and measures nothing; query --misses lists none.
"$ft" tune --search exhaustive specs/flash_fwd.lua --misses --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 || fail "tune --misses on an empty database failed"
grep -q 'no misses recorded for Fake GPU' "$dir/out" || fail "tune --misses should say that nothing was missed"
[ "$(sql 'select count(*) from results')" = 0 ] || fail "tune --misses without misses measured something"
"$ft" query --misses --db "$db" > "$dir/out" 2>&1 || fail "query --misses failed"
grep -q 'no misses recorded' "$dir/out" || fail "query --misses should say there are none"
echo "no misses: ok"

# 2. Three misses of this GPU model (two buckets under two driver versions) and one of another.
dev=$(sql "select id from devices where name = 'Fake GPU'")
[ -n "$dev" ] || fail "the tuner did not record its device"
sql "insert into devices (name, cc, sms, smem_per_block, smem_per_sm, l2_bytes, driver_version, nvrtc_version)
     select name, cc, sms, smem_per_block, smem_per_sm, l2_bytes, driver_version + 10, nvrtc_version
     from devices where id = $dev;
     insert into devices (name, cc, sms, smem_per_block, smem_per_sm, l2_bytes, driver_version, nvrtc_version)
     values ('Other GPU', 80, 108, 166912, 167936, 41943040, 13000, '13.0');" || fail "cannot add devices"
newer=$(sql "select max(id) - 1 from devices")
other=$(sql "select max(id) from devices")
# Misses as rows of the old bucket columns (device, dtype, d, causal, seqlen, bh, the shape, the
# fallback, the count), stored as the operation and its key (a prefill key: group 1, sq = seqlen).
insert_misses="insert into misses (device_id, op, key, batch, heads_q, heads_kv, seqlen_q, seqlen_k, fallback, count)
  select column1, 'fwd', json_object('dtype', column2, 'd', column3, 'causal', column4, 'group', 1, 'sq', column5,
    'seqlen', column5, 'bh', column6), column7, column8, column9, column10, column11, column12, column13 from (values"
# key DTYPE D CAUSAL GROUP SQ SEQLEN BH: the forward's key text, as the runtime records it
key() { echo "json_object('dtype', '$1', 'd', $2, 'causal', $3, 'group', $4, 'sq', $5, 'seqlen', $6, 'bh', $7)"; }
sql "insert into misses (device_id, op, key, batch, heads_q,
       heads_kv, seqlen_q, seqlen_k, fallback, count) values
     ($dev, 'fwd', $(key f16 64 1 1 256 256 2), 1, 2, 2, 200, 200, 'nearest', 3),
     ($newer, 'fwd', $(key f16 64 0 2 4096 4096 16), 2, 8, 4, 3000, 2500, 'default', 1),
     ($newer, 'fwd', $(key f16 64 1 1 256 256 2), 2, 1, 1, 256, 256, 'nearest', 1),
     ($other, 'fwd', $(key f16 64 0 1 1024 1024 8), 1, 8, 8, 1024, 1024, 'default', 7);" || fail "cannot add misses"
"$ft" query --misses --db "$db" > "$dir/out" 2>&1 || fail "query --misses failed"
grep -q '^4 misses in' "$dir/out" || fail "query --misses: expected 4 misses"
grep -q 'Fake GPU .*f16 *64 *1 *1 *256 *256 *2 *b=1,hq=2,hkv=2,sq=200,sk=200 *nearest *3 .* no$' "$dir/out" ||
  fail "query --misses: the first miss is not listed as recorded"
"$ft" query --misses --db "$db" --device other --json > "$dir/out" 2>&1 || fail "query --misses --json failed"
[ "$(grep -c '"tuned": false' "$dir/out")" = 1 ] || fail "query --misses --device: expected one JSON row"
grep -q '"device": "Other GPU".*"shape": "b=1,hq=8,hkv=8,sq=1024,sk=1024", "fallback": "default", "count": 7' "$dir/out" ||
  fail "query --misses --json: unexpected row"
"$ft" query --misses --all --db "$db" > "$dir/out" 2>&1 && fail "query --misses --all should be a usage error"
echo "query --misses: ok"

# 3. tune --misses tunes the two missed buckets of this model (whatever the driver), nothing else.
"$ft" tune --search exhaustive specs/flash_fwd.lua --misses --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 || fail "tune --misses failed"
grep -q 'tune: 2 missed buckets of Fake GPU' "$dir/out" || fail "tune --misses: expected 2 missed buckets"
grep -q 'tuned Fake GPU: 2 buckets, 20 variants' "$dir/out" || fail "tune --misses: expected 2 buckets"
grep -q 'measured 20, already in the database 0' "$dir/out" || fail "tune --misses: expected 20 measurements (10 variants per causality)"
[ "$(sql "select count(*) from v_winners where device_id = $dev")" = 2 ] || fail "expected 2 winners"
[ "$(sql "select count(*) from results where seqlen_q = 3000 and seqlen_k = 2500 and batch = 2")" = 10 ] ||
  fail "the missed bucket was not measured on the shape that missed"
"$ft" query --misses --db "$db" --device fake > "$dir/out" 2>&1 || fail "query --misses failed"
# tuned is per fingerprint: the winners are this driver's; the misses recorded under the
# other driver have none of their own (a runtime under that driver would not use these).
[ "$(grep -c ' yes$' "$dir/out")" = 1 ] || fail "the miss recorded under this driver should show as tuned"
[ "$(grep -c ' no$' "$dir/out")" = 2 ] || fail "the misses recorded under the other driver have no winners of their own"
"$ft" tune --search exhaustive specs/flash_fwd.lua --misses --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 || fail "the second tune --misses failed"
grep -q 'measured 0, already in the database 20' "$dir/out" || fail "the second tune --misses re-measured"
echo "tune --misses: ok"

# 4. Misses whose shapes are invalid (the database may hold anything) are reported and skipped,
#    never sent to the worker; the valid ones are tuned as before.
sql "$insert_misses
     ($dev, 'f16', 64, 0, 128, 1, -5, 0, 1, 128, 128, 'default', 1),
     ($dev, 'f16', 64, 0, 128, 8, 1, 8, 3, 128, 128, 'default', 1),
     ($dev, 'f16', 100, 0, 128, 8, 1, 8, 8, 128, 128, 'failed', 1),
     ($dev, 'f16', 24, 0, 128, 8, 1, 8, 8, 128, 128, 'failed', 1),
     ($dev, 'f16', 64, 0, 128, 1073741824, 65536, 65536, 1, 128, 128, 'default', 1),
     ($dev, 'f16', 64, 1, 256, 4, 1, 4, 4, 3000, 3000, 'nearest', 1),
     ($dev, 'f32', 64, 0, 128, 8, 1, 8, 8, 128, 128, 'default', 1),
     ($dev, 'f16', 64, 0, 128, 16, 4294967297, 8, 8, 128, 128, 'default', 1));" || fail "cannot add invalid misses"
FAKE_LOG="$dir/log" "$ft" tune --search exhaustive specs/flash_fwd.lua --misses --remeasure --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 ||
  fail "tune --misses with invalid misses failed"
grep -q 'tune: 2 missed buckets of Fake GPU (8 recorded misses skipped for an invalid shape)' "$dir/out" ||
  fail "tune --misses: the invalid misses are not counted"
[ "$(grep -c '^flashtune tune: skipping the recorded miss ' "$dir/out")" = 8 ] || fail "tune --misses: expected 8 skipped misses"
for why in 'f16 d=64 causal=0 b=-5,hq=0,hkv=1,sq=128,sk=128 (driver [0-9]*): every size must be positive' \
           'hq (8) must be a multiple of hkv (3)' 'head dim 100 is not supported' 'no spec has kernels of head dim 24' \
           'batch 65536 times 65536 heads' 'b=1,hq=4,hkv=4,sq=3000,sk=3000 (driver [0-9]*): the shape is not in the recorded bucket (group <= 1, sq <= 256, seqlen <= 256, b\*h <= 4)' \
           'f32 d=64 .*: the dtype is neither f16 nor bf16' \
           'b=-1,hq=8,hkv=8,sq=128,sk=128 (driver [0-9]*): every size must be positive'; do
  grep -q "skipping the recorded miss .*$why" "$dir/out" || fail "tune --misses: no message saying '$why'"
done
grep -q 'measured 20, already in the database 0: 20 ok' "$dir/out" || fail "tune --misses: the valid misses were not measured"
[ "$(grep -c '^\[0\] shape ' "$dir/log")" = 2 ] || fail "tune --misses: expected the 2 valid shapes only"
grep '^\[0\] shape ' "$dir/log" | grep -v -q -E ' b=(1|2) hq=(2|8) hkv=(2|4) sq=(200|3000) sk=(200|2500) d=64 ' &&
  fail "tune --misses: an invalid shape reached the worker"
[ "$(sql 'select count(*) from results where batch <= 0 or heads_q <= 0 or heads_q % heads_kv != 0')" = 0 ] ||
  fail "tune --misses: a result for an invalid shape"
echo "invalid misses skipped: ok"

# 5. Only invalid misses: nothing to tune, said so.
db=$dir/invalid.db
"$ft" tune --search exhaustive specs/flash_fwd.lua --misses --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 || fail "tune --misses on a new database failed"
dev=$(sql "select id from devices where name = 'Fake GPU'")
sql "$insert_misses
     ($dev, 'f16', 64, 0, 128, 1, -5, 0, 1, 128, 128, 'default', 1));" || fail "cannot add an invalid miss"
"$ft" tune --search exhaustive specs/flash_fwd.lua --misses --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 || fail "tune --misses with one invalid miss failed"
grep -q 'tune: no valid misses recorded for Fake GPU in .* (1 skipped for an invalid shape): nothing to tune' "$dir/out" ||
  fail "tune --misses: an invalid miss only should say that nothing is left"
[ "$(sql 'select count(*) from results')" = 0 ] || fail "tune --misses: measured an invalid miss"
echo "only invalid misses: ok"

# 6. A miss of a head dim no spec lists: the open d takes it (112, a multiple of 16: its
#    variants are compiled and the miss tuned); one the constraints prune (264, past 256) is
#    skipped, said so.
# new_db FILE ROWS: a database with this GPU's device row (a tune with no misses makes it) and
# misses of it: ROWS of the misses table's values, DEV standing for the device's id.
new_db() {
  db=$1
  "$ft" tune --search exhaustive specs/flash_fwd.lua --misses --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 || fail "tune --misses on a new database failed"
  dev=$(sql "select id from devices where name = 'Fake GPU'")
  sql "insert into misses (device_id, op, key, batch, heads_q, heads_kv, seqlen_q, seqlen_k, fallback, count) values
       $(printf '%s' "$2" | sed "s/DEV/$dev/g");" || fail "cannot add the misses"
}
new_db "$dir/open.db" "(DEV, 'fwd', $(key f16 112 0 1 1024 1024 8), 1, 8, 8, 1000, 1000, 'default', 2),
                       (DEV, 'fwd', $(key f16 264 0 1 1024 1024 8), 1, 8, 8, 1000, 1000, 'failed', 1)"
"$ft" tune --search exhaustive specs/flash_fwd.lua --misses --db "$db" --only 'bm=64,bn=64,warps=4,stages=1,dtype=f16,qreg=0,overlap=0' -q -j 2 \
  > "$dir/out" 2>&1 || fail "tune --misses of d=112 failed"
grep -q 'skipping the recorded miss .*d=264 .*no spec has kernels of head dim 264' "$dir/out" || fail "the d=264 miss was not skipped"
grep -q 'measured 1, already in the database 0: 1 ok' "$dir/out" || fail "the d=112 miss was not measured"
grep -q 'tuned Fake GPU: 1 buckets, 1 variants' "$dir/out" || fail "tune --misses compiled more than the missed bucket's variant"
[ "$(sql "select count(*) from results r join kernels k on k.id = r.kernel_id where k.variant like 'd=112,%' and r.seqlen_q = 1000")" = 1 ] ||
  fail "no result of a d=112 kernel on the missed shape"
echo "a missed head dim no spec lists: ok"

# 7. Two missed buckets of one group tuned with --search ranked: the group (d = 64, bm = 64, f16,
#    causal: 30 variants) compiles 16 candidates, then refines at most twice, each refinement a
#    task per bucket (up to six tasks for two targets: the workers' task lists have room).
new_db "$dir/ranked.db" "(DEV, 'fwd', $(key f16 64 1 1 1024 1024 8), 1, 8, 8, 1000, 1000, 'default', 2),
                         (DEV, 'fwd', $(key f16 64 1 1 4096 4096 8), 1, 8, 8, 4000, 4000, 'default', 1)"
"$ft" tune specs/flash_fwd.lua --misses --db "$db" --only 'd=64,bm=64' --search ranked -q -j 2 > "$dir/out" 2>&1 ||
  fail "tune --misses --search ranked failed"
grep -q 'tuned Fake GPU: 2 buckets' "$dir/out" || fail "tune --misses --search ranked: expected 2 buckets"
for sq in 1000 4000; do
  n=$(sql "select count(*) from results r join kernels k on k.id = r.kernel_id where k.variant like 'd=64,bm=64,%dtype=f16%' and r.seqlen_q = $sq")
  [ "$n" -gt 16 ] && [ "$n" -lt 30 ] || fail "tune --misses --search ranked: $n variants measured at sq=$sq, not the 16 candidates and a refinement"
done
[ "$(sql "select count(*) from v_winners where device_id = $dev")" = 2 ] || fail "tune --misses --search ranked: expected 2 winners"
echo "missed buckets, ranked and refined: ok"
