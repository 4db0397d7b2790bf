#!/bin/sh
# The backward's spec through the command, no GPU needed: plan and gen compile its kernels
# (three per variant); run, which measures forward kernels only so far, refuses it with a message
# that says so; tune measures it with a stand-in worker (verify takes it: gpu_verify.sh).
#   bwd_cli.sh path/to/flashtune path/to/fake_worker
set -u
ft=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "bwd_cli: $*"; [ -f "$dir/out" ] && cat "$dir/out"; exit 1; }
spec=specs/flash_bwd.lua
v='d=64,bm=64,bn=64,warps=4,split=1,stages=2,causal=1,dtype=bf16,gqa=atomic,det=1'

# gen: the source defines the main kernel and its pre and post kernels; --cubin compiles them.
"$ft" gen "$spec" --variant "$v" > "$dir/src.cu" 2> "$dir/out" || fail "gen failed"
entry=$(sed -n 's|^// entry     \([A-Za-z0-9_]*\):.*|\1|p' "$dir/src.cu")
[ -n "$entry" ] || fail "gen's source names no entry"
tail -n 1 "$dir/src.cu" | grep -qx "FT_DEFINE_KERNEL($entry)" || fail "the source does not end in FT_DEFINE_KERNEL($entry)"
"$ft" gen "$spec" --variant "$v" --cubin "$dir/k.cubin" > /dev/null 2> "$dir/out" || fail "gen --cubin failed"
for k in "$entry" "${entry}_pre" "${entry}_post"; do
  grep -q "Compiling entry function '$k'" "$dir/out" || fail "ptxas compiled no $k"
done
grep -q 'spill' "$dir/out" || fail "no ptxas report"
echo "gen: three kernels: ok"

# plan: a sample through NVRTC for sm_80 and sm_90, nothing fails to compile.
for arch in sm_80 sm_90; do
  "$ft" plan "$spec" --arch "$arch" --sample 4 -q > "$dir/out" 2>&1 || fail "plan --arch $arch failed"
  # four compiled, or turned away for spilling (the spec rejects spills), none failing to compile
  grep -q "^summary ($arch): [0-9]* variants: [0-9]* compiled .* 0 compile errors, [0-9]* over limits" "$dir/out" ||
    fail "plan $arch: unexpected summary"
  c=$(sed -n 's/^summary .*: [0-9]* variants: \([0-9]*\) compiled .*/\1/p' "$dir/out")
  o=$(sed -n 's/^summary .* \([0-9]*\) over limits$/\1/p' "$dir/out")
  [ $((c + o)) -eq 4 ] || fail "plan $arch: $c compiled and $o over limits, not 4"
  [ "$o" -eq 0 ] || grep -q "^over limits: $o spills registers" "$dir/out" || fail "plan $arch: over a limit other than spills"
done
echo "plan: ok"

# run: refused (it measures forward kernels only), before anything is compiled.
"$ft" run --spec "$spec" --variant "$v" --shape b=1,hq=2,sq=100,d=64 > "$dir/out" 2>&1; rc=$?
[ $rc -eq 1 ] || fail "run: exit status $rc, expected 1"
grep -q "flash_bwd.lua: its kernels (flash_bwd_sm80) compute the bwd operation, and run measures fwd kernels only so far" \
  "$dir/out" || fail "run: no clear message"
echo "run refuses the backward: ok"

# tune with the stand-in worker: backward buckets (their key has det and group), each kernel's
# family and launch facts in the measure command, FLOPs of the backward (the worker's times are
# FLOPs / 100..500 TFLOP/s), results recorded under the bwd operation.
only='d=64,bm=32,bn=128,warps=4,split=1,stages=1,gqa=loop,dtype=f16'   # 4 variants: causal x det
db=$dir/t.db
FLASHTUNE_WORKER=$2 FAKE_LOG=$dir/log "$ft" tune "$spec" --db "$db" --only "$only" -q -j 2 > "$dir/out" 2>&1 ||
  fail "tune of the backward failed"
grep -q 'tuned Fake GPU: 24 buckets, 4 variants' "$dir/out" || fail "tune: expected 24 buckets (6 workloads x causal x det)"
grep -q 'measured 24, already in the database 0: 24 ok' "$dir/out" || fail "tune: expected 24 measurements"
[ "$(sqlite3 "$db" "select count(*) from results where op = 'bwd' and key like '%\"det\":1%'")" = 12 ] ||
  fail "tune: expected 12 deterministic backward results"
[ "$(sqlite3 "$db" "select count(*) from v_winners where op = 'bwd'")" = 24 ] || fail "tune: expected 24 backward winners"
grep -q '] shape id=[0-9]* op=bwd .* det=1 ' "$dir/log" || fail "tune: no deterministic backward shape sent"
grep '] measure ' "$dir/log" | grep -v -q 'family=flash_bwd_sm80 .* keys=128 gqa_atomic=0 det=[01] counter=0 tma_o=0$' &&
  fail "tune: a measure command without the backward kernel's family and launch facts"
sqlite3 "$db" "select k.variant, r.key from results r join kernels k on k.id = r.kernel_id" |
  grep -v -q 'det=\([01]\).*"det":\1,' && fail "tune: a kernel measured on a bucket of the other determinism"
"$ft" query --db "$db" --d 64 > "$dir/out" 2>&1 || fail "query failed"
[ "$(grep -c '^Fake GPU *bwd f16 .* winner' "$dir/out")" = 24 ] || fail "query: expected 24 backward winners"
echo "tune measures the backward: ok"

# packs carry backward winners: export, import into a fresh database (the same winners, keys and
# operation), the C export names each entry's operation and key and compiles.
"$ft" export --db "$db" --out "$dir/bwd.ftpack" > "$dir/out" 2>&1 || fail "export of backward winners failed"
grep -q '^exported 24 buckets ' "$dir/out" || fail "export: expected 24 buckets"
FLASHTUNE_WORKER=$2 "$ft" import "$dir/bwd.ftpack" --db "$dir/i.db" > "$dir/out" 2>&1 || fail "import failed"
winners() { sqlite3 "$1" "select op, key, variant from v_winners w join kernels k on k.id = w.kernel_id order by key"; }
[ "$(winners "$dir/i.db")" = "$(winners "$db")" ] || fail "the imported winners differ from the exported ones"
[ "$(sqlite3 "$dir/i.db" "select count(*) from v_winners where op = 'bwd'")" = 24 ] || fail "import: not 24 backward winners"
"$ft" export --db "$db" --format c --out "$dir/bwd_kernels.c" > "$dir/out" 2>&1 || fail "export --format c failed"
[ "$(grep -o '"bwd"' "$dir/bwd_kernels.c" | wc -l)" = 24 ] || fail "the C export does not name the bwd operation 24 times"
[ "$(grep -o 'det\\042:1' "$dir/bwd_kernels.c" | wc -l)" = 12 ] || fail "the C export's keys lack the 12 deterministic buckets"
${CC:-cc} -std=c11 -Wall -Wextra -Werror -pedantic -Iinclude -c -o "$dir/bwd_kernels.o" "$dir/bwd_kernels.c" \
  > "$dir/out" 2>&1 || fail "the C export does not compile"
echo "packs carry the backward: ok"
echo "bwd_cli: ok"
