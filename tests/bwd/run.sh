#!/bin/sh
# Builds the backward harness (tests/bwd/harness.cu) with a small set of variants of
# templates/flash_bwd_sm80.cuh for the GPU present, and runs it.
#
#   tests/bwd/run.sh [--bench] [--sanitize] [--build-only] [harness options: --no-test, --only SUBSTRING]
#
# --bench adds the timings (after the checks); --sanitize runs compute-sanitizer's memcheck,
# racecheck and synccheck over every variant on the small shapes instead of the checks;
# --build-only stops after compiling (no GPU needed;
# set FT_BWD_ARCH, e.g. sm_80 or sm_90). FT_BWD_EXTRA adds variant lines in the format of
# tests/bwd/variants.txt (e.g. for a timing experiment). The target is FT_BWD_ARCH, else the
# compute capability nvidia-smi reports, else -arch=native. Builds into $FT_BWD_BUILD (default build/bwd); the
# harness writes bwd_log.txt and bwd_results.json to $OUT when it is set, and this script adds
# the ptxas report of every variant there (bwd_ptxas.txt).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${FT_BWD_BUILD:-$root/build/bwd}
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=${NVCC:-$cuda/bin/nvcc}
[ -x "$nvcc" ] || nvcc=nvcc
cc=${CC:-gcc}

build_only=0
bench=0
sanitize=0
pass=""
for a in "$@"; do
  case "$a" in
    --build-only) build_only=1 ;;
    --sanitize) sanitize=1 ;;
    --bench) bench=1; pass="$pass $a" ;;
    *) pass="$pass $a" ;;
  esac
done

if [ -n "${FT_BWD_ARCH:-}" ]; then
  arch="-arch=$FT_BWD_ARCH"
elif cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1) && [ -n "$cap" ]; then
  arch="-arch=sm_$(echo "$cap" | tr -d ' .')"
else
  arch="-arch=native"
fi

# name  d  bm  bn  warps split stages causal dtype gqa det (tests/bwd/variants.txt)
variants="$(grep -v '^#' "$here/variants.txt")
${FT_BWD_EXTRA:-}
"

mkdir -p "$build/c"
rm -rf "$build/var"
mkdir -p "$build/var"
t0=$(date +%s)
echo "building into $build ($arch)"
objs=""
pids=""
echo "$variants" | while read -r name d bm bn w sp st c dt g det; do
  [ -n "$name" ] || continue
  # The prelude the generator writes: the parameters, the shared-memory size (the spec's
  # formula), then the template and the entry points (variant.cu).
  smem=$(( 2 * bn * (d + 8) * 2 + 2 * st * bm * (d + 8) * 2 + sp * bn * (bm + 8) * 2 + 2 * st * bm * 4 ))
  {
    echo "// variant $name: d=$d,bm=$bm,bn=$bn,warps=$w,split=$sp,stages=$st,causal=$c,dtype=$dt,gqa=$g,det=$det"
    echo "#define FTP_D $d"
    echo "#define FTP_BM $bm"
    echo "#define FTP_BN $bn"
    echo "#define FTP_WARPS $w"
    echo "#define FTP_SPLIT $sp"
    echo "#define FTP_STAGES $st"
    echo "#define FTP_CAUSAL $c"
    echo "#define FTP_DTYPE_$(echo "$dt" | tr a-z A-Z) 1"
    echo "#define FTP_GQA_$(echo "$g" | tr a-z A-Z) 1"
    echo "#define FTP_DET $det"
    echo "#define FT_SMEM_BYTES $smem"
    echo "#define FTV_ENTRY ft_bwd_$name"
    echo "#include \"$here/variant.cu\""
  } > "$build/var/$name.cu"
done

# Variants compile in parallel (one nvcc each), then the harness and the C reference.
for f in "$build"/var/*.cu; do
  n=$(basename "$f" .cu)
  "$nvcc" -std=c++17 -O3 $arch -I"$root" -I"$root/templates/include" -Xptxas -v -c "$f" -o "$build/var/$n.o" > "$build/var/$n.ptxas" 2>&1 &
  pids="$pids $!"
done
"$nvcc" -std=c++17 -O3 $arch -I"$root" -I"$root/include" -I"$root/templates/include" -I"$here" -c "$here/harness.cu" -o "$build/harness.o" &
pids="$pids $!"
for s in runtime/reference_cpu.c ops/problem.c ops/op.c ops/key.c ops/fwd.c ops/bwd.c common/error.c tests/bwd/cpu_ref.c; do
  "$cc" -std=c11 -O2 -Wall -D_GNU_SOURCE -I"$root" -I"$root/include" -I"$cuda/include" -c "$root/$s" \
    -o "$build/c/$(basename "$s" .c).o"
done
fail=0
for p in $pids; do
  wait "$p" || fail=1
done
for f in "$build"/var/*.ptxas; do
  if grep -q "error" "$f"; then
    echo "== $(basename "$f" .ptxas): compile errors"
    grep -B2 -A5 "error" "$f" | head -n 40
    fail=1
  fi
done
[ "$fail" -eq 0 ] || { echo "build failed"; exit 1; }
"$nvcc" $arch "$build"/var/*.o "$build/harness.o" "$build"/c/*.o -o "$build/harness"

# The main kernels' resource reports (the _pre and _post kernels are small).
report="$build/ptxas.txt"
: > "$report"
for f in "$build"/var/*.ptxas; do
  n=$(basename "$f" .ptxas)
  {
    printf '%s %s\n' "$n" "$(head -n 1 "$build/var/$n.cu" | sed 's|^// variant [^:]*: ||')"
    awk '/Compiling entry function/ { main = ($0 ~ /_(pre|post)'"'"'/) ? 0 : 1 }
         main && /spill|Used/ { sub(/^ptxas info *: */, ""); print "    " $0 }' "$f"
  } >> "$report"
done
cat "$report"
echo "built in $(( $(date +%s) - t0 )) s"
if [ -n "${OUT:-}" ]; then
  cp "$report" "$OUT/bwd_ptxas.txt"
fi
[ "$build_only" -eq 0 ] || exit 0

if [ "$sanitize" -eq 1 ]; then
  san=${COMPUTE_SANITIZER:-$cuda/bin/compute-sanitizer}
  [ -x "$san" ] || san=compute-sanitizer
  rc=0
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer --tool $tool"
    timeout 170 "$san" --tool "$tool" --error-exitcode 3 "$build/harness" --no-ref --small --log-append $pass \
      > "$build/sanitize_$tool.txt" 2>&1 || rc=$?
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|========= (Invalid|Race|Barrier|Error)" \
      "$build/sanitize_$tool.txt" | sort | uniq -c | head -n 20
    grep -E "^  (ok|FAIL) " "$build/sanitize_$tool.txt" | awk '{ print $1 }' | sort | uniq -c
  done
  [ -z "${OUT:-}" ] || cat "$build"/sanitize_*.txt > "$OUT/bwd_sanitize.txt"
  exit "$rc"
fi

# A deadlocked deterministic variant must not hang the machine: the harness gets 4 minutes.
# After a fault (exit status 2: a CUDA error poisons the process) or a timeout, each variant
# runs again on its own, so that one bad variant does not hide the others' results.
rc=0
timeout 240 "$build/harness" $pass || rc=$?
if [ "$rc" -ge 2 ]; then
  echo "harness stopped with status $rc; each variant again on its own"
  echo "$variants" | while read -r name rest; do
    [ -n "$name" ] || continue
    timeout 60 "$build/harness" --no-ref --log-append --only "ft_bwd_$name" || echo "ft_bwd_$name: status $?"
  done
fi
# FlashAttention-2's backward on the same grid, where PyTorch is installed (the H200 machine).
if [ "$bench" -eq 1 ] && python3 -c "import torch" > /dev/null 2>&1; then
  echo "FlashAttention-2 backward (SDPA FLASH_ATTENTION), same grid and method:"
  python3 "$here/fa2_bench.py" ${OUT:+--out "$OUT/fa2_results.json"} || true
fi
exit "$rc"
