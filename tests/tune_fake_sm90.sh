#!/bin/sh
# The tuner with the built-in specs and a stand-in worker (tests/fake_worker.c), no GPU needed:
# `flashtune tune` without SPEC takes the sm_90a family (specs/flash_fwd_sm90.lua) only on
# compute capability 9.0, and a --only filter that only one family knows tunes that family.
#   tune_fake_sm90.sh path/to/flashtune path/to/fake_worker
set -u
ft=$1
export FLASHTUNE_WORKER=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "tune_fake_sm90: $*"; [ -f "$dir/out" ] && cat "$dir/out"; exit 1; }
tune() { "$ft" tune --search exhaustive --db "$db" -q -j 2 "$@" > "$dir/out" 2>&1; }
count() { sqlite3 "$db" "$1"; }

# Parameters both families have: per causal value, flash_fwd keeps 2 variants (qreg 0/1;
# warps=8 cannot split 64 rows) and flash_fwd_sm90 keeps 8 non-causal and 24 causal (ping-pong
# needs bm=128 or 192; balance 0/1/2 only when causal; pexp 0/2 at d = 64; ostore 0/1; early_rescale
# only above d = 128; ctas 1/2: bm=64 tiles this small fit two a multiprocessor). Both specs have
# the same six d=64 workloads: 12 buckets (6 x 2 causal). flash_fwd_sm90 has three more at d = 64
# with 8 query heads per K/V head (6 buckets), where its pack=1 twins would join (the spec keeps
# pack=1 out until the GPU verifies it; a copy of the spec that keeps it shows the tuner's part:
# the twins measured there only, and pack=1 reaching the worker as a launch fact).
both='d=64,bm=64,bn=64,stages=2,dtype=f16,overlap=0'

# 1. Compute capability 8.0: only flash_fwd is measured, 2 variants per bucket.
db=$dir/cc80.db
FAKE_CC=80 FAKE_LOG="$dir/log80" tune --only "$both" || fail "tune on cc 8.0 failed"
grep -q 'measured 24, already in the database 0: 24 ok' "$dir/out" || fail "cc 8.0: expected 24 measurements"
[ "$(count "select count(*) from kernels where family = 'flash_fwd_sm90'")" = 0 ] || fail "cc 8.0: sm90 kernels recorded"
[ "$(count "select count(*) from kernels where family = 'flash_fwd_sm80'")" = 4 ] || fail "cc 8.0: expected 4 sm80 kernels"
[ "$(count 'select count(*) from v_winners')" = 12 ] || fail "cc 8.0: expected 12 winners"
"$ft" query --db "$db" --all > "$dir/out" 2>&1 || fail "cc 8.0: query --all failed"
grep -q '^24 rows from' "$dir/out" || fail "cc 8.0: query --all: expected 24 rows"
grep -q 'pingpong=' "$dir/out" && fail "cc 8.0: query --all shows sm90 variants"
grep -q 'warps=4' "$dir/out" || fail "cc 8.0: query --all shows no flash_fwd variant"
grep -q 'entry=ft_flash_fwd_sm90' "$dir/log80" && fail "cc 8.0: the worker was asked to measure an sm90 kernel"
echo "cc 8.0, built-in specs: flash_fwd only: ok"

# 2. Compute capability 9.0: both families on the same 12 buckets, 32 sm90 variants (8 + 24),
#    and flash_fwd_sm90 alone on its 6 grouped ones with the same 32: 216 + 96 measurements;
#    the sm90 kernels are launched with tensor maps of the K/V tile (tma_kv = bn) and 128
#    threads per consumer warpgroup plus a producer warpgroup.
db=$dir/cc90.db
FAKE_CC=90 FAKE_LOG="$dir/log90" tune --only "$both" || fail "tune on cc 9.0 failed"
grep -q 'measured 312, already in the database 0: 312 ok' "$dir/out" || fail "cc 9.0: expected 312 measurements"
grep -q 'tuned Fake GPU: 18 buckets' "$dir/out" || fail "cc 9.0: the summary should count each shared bucket once"
grep -q '^winners: 18 buckets' "$dir/out" || fail "cc 9.0: the summary should count 18 winners"
[ "$(count "select count(*) from kernels where family = 'flash_fwd_sm90'")" = 32 ] || fail "cc 9.0: expected 32 sm90 kernels"
[ "$(count "select count(*) from kernels where family = 'flash_fwd_sm80'")" = 4 ] || fail "cc 9.0: expected 4 sm80 kernels"
[ "$(count "select count(*) from kernels where family = 'flash_fwd_sm90' and threads = 256")" = 32 ] ||
  fail "cc 9.0: sm90 kernels with bm=64 should have 256 threads"
[ "$(count 'select count(*) from results')" = 312 ] || fail "cc 9.0: the database does not hold 312 results"
[ "$(count 'select count(*) from v_winners')" = 18 ] || fail "cc 9.0: expected 18 winners (one per bucket, both families)"
# pack=1 measured nowhere (the spec keeps it out), and flash_fwd only in its own buckets (none
# grouped)
[ "$(count "select count(*) from kernels where variant like '%pack=1%'")" = 0 ] ||
  fail "cc 9.0: a pack=1 kernel recorded, which the spec prunes"
[ "$(count "select count(*) from results r join kernels k on k.id = r.kernel_id where k.family = 'flash_fwd_sm80' and r.heads_q <> r.heads_kv")" = 0 ] ||
  fail "cc 9.0: flash_fwd measured on a grouped shape it has no workload of"
"$ft" query --db "$db" --all > "$dir/out" 2>&1 || fail "cc 9.0: query --all failed"
grep -q '^312 rows from' "$dir/out" || fail "cc 9.0: query --all: expected 312 rows"
[ "$(grep -c 'ctas=2' "$dir/out")" = 144 ] || fail "cc 9.0: query --all: expected 144 rows of two-CTA sm90 variants"
[ "$(grep -c 'pingpong=0' "$dir/out")" = 288 ] || fail "cc 9.0: query --all: expected 288 rows of sm90 variants"
[ "$(grep -c 'balance=1' "$dir/out")" = 72 ] || fail "cc 9.0: query --all: expected 72 rows of balanced sm90 variants"
[ "$(grep -c 'balance=2' "$dir/out")" = 72 ] || fail "cc 9.0: query --all: expected 72 rows of longest-first sm90 variants"
[ "$(grep -c 'warps=4' "$dir/out")" = 24 ] || fail "cc 9.0: query --all: expected 24 rows of flash_fwd variants"
# the measure commands (a race command names several kernels of both families)
grep '^\[[0-9]\] measure ' "$dir/log90" > "$dir/measures90"
grep 'entry=ft_flash_fwd_sm90' "$dir/measures90" > "$dir/sm90" || fail "cc 9.0: no sm90 kernel measured"
grep -v -q -E 'tma_kv=64( |$)' "$dir/sm90" && fail "cc 9.0: an sm90 measurement without tma_kv=64"
grep -v -q 'threads=256 ' "$dir/sm90" && fail "cc 9.0: an sm90 measurement without threads=256"
grep -v -q 'span=64 ' "$dir/sm90" && fail "cc 9.0: an sm90 measurement at d=64 without its tensor maps' span=64"
grep 'entry=ft_flash_fwd_sm80' "$dir/measures90" | grep -q 'span=[1-9]' && fail "cc 9.0: an sm80 kernel given a swizzle span"
grep 'entry=ft_flash_fwd_sm80' "$dir/measures90" | grep -q 'tma_kv=[1-9]' && fail "cc 9.0: an sm80 kernel given tensor maps"
grep -q '_pack1 ' "$dir/sm90" && fail "cc 9.0: a pack=1 kernel measured"
echo "cc 9.0, built-in specs: both families: ok"

# 2b. pack=1 through a copy of the spec without the constraint that keeps it out (spec modules
#     come from the copy's folder, else the built-in ones): its twins measured in the 6 grouped
#     buckets only (8 non-causal and 24 causal a bucket), each with the launch fact pack=1.
sed '/only once the GPU verifies them/,+1d' specs/flash_fwd_sm90.lua > "$dir/fwd_sm90_pack.lua"
grep -q 'v.pack == 0 end' "$dir/fwd_sm90_pack.lua" && fail "pack: the copy still prunes pack=1"
db=$dir/pack.db
FAKE_CC=90 FAKE_LOG="$dir/logpack" tune "$dir/fwd_sm90_pack.lua" --only "$both" || fail "pack: tune of the copy failed"
[ "$(count "select count(*) from results r join kernels k on k.id = r.kernel_id where k.variant like '%pack=1%' and r.heads_q = r.heads_kv")" = 0 ] ||
  fail "pack: pack=1 measured on a shape without groups"
[ "$(count "select count(*) from results r join kernels k on k.id = r.kernel_id where k.variant like '%pack=1%' and r.heads_q = 8 * r.heads_kv")" = 96 ] ||
  fail "pack: expected 96 pack=1 results on the grouped shapes"
grep '^\[[0-9]\] measure ' "$dir/logpack" | grep 'entry=ft_flash_fwd_sm90' > "$dir/sm90pack" || fail "pack: nothing measured"
grep ' pack=1' "$dir/sm90pack" | grep -q 'entry=ft_flash_fwd_sm90_[a-z0-9_]*_pack1 ' ||
  fail "pack: no measurement of a pack=1 kernel with pack=1"
grep ' pack=1' "$dir/sm90pack" | grep -q '_pack0 ' && fail "pack: pack=1 given a pack=0 kernel"
grep '_pack1 ' "$dir/sm90pack" | grep -q ' pack=0' && fail "pack: a pack=1 kernel measured without pack=1"
echo "cc 9.0, pack=1 through a copy of the spec: ok"

# 3. A filter naming a parameter only flash_fwd has (warps) tunes flash_fwd alone on cc 9.0,
#    instead of failing on flash_fwd_sm90's parameters.
db=$dir/warps.db
FAKE_CC=90 tune --only "$both,warps=4" || fail "--only warps=4 on cc 9.0 failed"
grep -q 'measured 24, already in the database 0: 24 ok' "$dir/out" || fail "--only warps=4: expected 24 measurements"
[ "$(count "select count(*) from kernels where family = 'flash_fwd_sm90'")" = 0 ] || fail "--only warps=4: sm90 kernels recorded"
"$ft" query --db "$db" --all > "$dir/out" 2>&1 || fail "--only warps=4: query --all failed"
grep -q 'pingpong=' "$dir/out" && fail "--only warps=4: query --all shows sm90 variants"
echo "cc 9.0, --only warps=4: flash_fwd only: ok"

# 4. And one only flash_fwd_sm90 knows (pingpong) tunes it alone; on cc 8.0 that leaves no
#    spec, a clear error. A parameter no spec knows is the usual error.
db=$dir/pingpong.db
FAKE_CC=90 tune --only "$both,pingpong=0" || fail "--only pingpong=0 on cc 9.0 failed"
grep -q 'measured 288, already in the database 0: 288 ok' "$dir/out" || fail "--only pingpong=0: expected 288 measurements"
[ "$(count "select count(*) from kernels where family = 'flash_fwd_sm80'")" = 0 ] || fail "--only pingpong=0: sm80 kernels recorded"
db=$dir/none.db
FAKE_CC=80 tune --only "$both,pingpong=0" && fail "--only pingpong=0 on cc 8.0 should fail"
grep -q 'no spec has kernels for Fake GPU (sm_80)' "$dir/out" || fail "--only pingpong=0 on cc 8.0: no clear message"
FAKE_CC=90 tune --only 'tile=2' && fail "--only tile=2 should fail"
grep -q "unknown parameter 'tile'" "$dir/out" || fail "--only tile=2: no clear message"
echo "filters of one family, or none: ok"

# 5. Naming the sm90 spec: tuned on cc 9.0 (ping-pong, skip_rescale and ostore both ways, overlap
#    three ways (2 only without ping-pong), balance three ways when causal, d=128 buckets),
#    refused on cc 8.0 with the reason.
db=$dir/sm90.db
FAKE_CC=90 FAKE_LOG="$dir/log90b" tune flash_fwd_sm90 --only 'd=128,bm=128,bn=128,stages=2,dtype=bf16' || fail "tune flash_fwd_sm90 failed"
grep -q 'tuned Fake GPU: 12 buckets, 80 variants' "$dir/out" || fail "tune flash_fwd_sm90: expected 12 buckets, 80 variants"
grep -q 'measured 480, already in the database 0: 480 ok' "$dir/out" || fail "tune flash_fwd_sm90: expected 480 measurements"
[ "$(count "select count(distinct variant) from kernels where family = 'flash_fwd_sm90' and threads = 384")" = 80 ] ||
  fail "tune flash_fwd_sm90: expected 80 kernels of 384 threads"
grep ' pair=1 ' "$dir/log90b" | grep -q 'entry=ft_flash_fwd_sm90_d128_[a-z0-9_]*_causal1_' ||
  fail "tune flash_fwd_sm90: no causal measurement with balance=1"
grep ' pair=1 ' "$dir/log90b" | grep -q '_causal0_' && fail "tune flash_fwd_sm90: a non-causal measurement with balance=1"
# the block counter (balance=2) reaches the worker as counter=1, on causal variants with it only
grep '^\[[0-9]\] measure ' "$dir/log90b" > "$dir/measures90b"
grep ' counter=1' "$dir/measures90b" | grep -q 'entry=ft_flash_fwd_sm90_d128_[a-z0-9_]*_causal1_[a-z0-9_]*_balance2_' ||
  fail "tune flash_fwd_sm90: no causal measurement with balance=2 and counter=1"
grep ' counter=1' "$dir/measures90b" | grep -q -v '_balance2_' && fail "tune flash_fwd_sm90: counter=1 without balance=2"
grep '_balance2_' "$dir/measures90b" | grep -q ' counter=0' && fail "tune flash_fwd_sm90: balance=2 without counter=1"
# O's tensor map (ostore=1) reaches the worker as tma_o=1, on those variants only
grep ' tma_o=1' "$dir/measures90b" | grep -q 'entry=ft_flash_fwd_sm90_d128_[a-z0-9_]*_ostore1_' ||
  fail "tune flash_fwd_sm90: no measurement with ostore=1 and tma_o=1"
grep ' tma_o=1' "$dir/measures90b" | grep -q -v '_ostore1_' && fail "tune flash_fwd_sm90: tma_o=1 without ostore=1"
grep '_ostore1_' "$dir/measures90b" | grep -q ' tma_o=0' && fail "tune flash_fwd_sm90: ostore=1 without tma_o=1"
db=$dir/sm90-cc80.db
FAKE_CC=80 tune flash_fwd_sm90 --only 'd=128,bm=128,bn=128,stages=2,dtype=bf16' && fail "tune flash_fwd_sm90 on cc 8.0 should fail"
grep -q 'runs only on compute capability 9.0' "$dir/out" || fail "tune flash_fwd_sm90 on cc 8.0: no clear message"
echo "tune flash_fwd_sm90: ok"
