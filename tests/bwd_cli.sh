#!/bin/sh
# The backward's spec through the command, no GPU needed: plan and gen compile its kernels
# (three per variant); run and tune, which measure forward kernels only so far, refuse it with a
# message that says so, and tune leaves no database behind (verify takes it: gpu_verify.sh).
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
  grep -q "^summary ($arch): [0-9]* variants: 4 compiled .* 0 compile errors" "$dir/out" || fail "plan $arch: unexpected summary"
done
echo "plan: ok"

# run and tune: refused, before anything is compiled or written.
expect_refused() {
  what=$1; shift
  "$@" > "$dir/out" 2>&1; rc=$?
  [ $rc -eq 1 ] || fail "$what: exit status $rc, expected 1"
  grep -q "flash_bwd.lua: its kernels (flash_bwd_sm80) compute the bwd operation, and $what fwd kernels only so far" \
    "$dir/out" || fail "$what: no clear message"
}
expect_refused "run measures" "$ft" run --spec "$spec" --variant "$v" --shape b=1,hq=2,sq=100,d=64
FLASHTUNE_WORKER=$2 expect_refused "tune measures" "$ft" tune "$spec" --db "$dir/t.db"
[ ! -e "$dir/t.db" ] || fail "a refused tune left a database"
echo "run and tune refuse the backward: ok"
echo "bwd_cli: ok"
