#!/bin/sh
# Fuzzes the pack reader (ft__pack_parse) and the spec loader (ft__spec_load_text) with
# libFuzzer: builds tests/fuzz/ with clang, ASan and UBSan into build-fuzz/ (-DFT_FUZZ=ON),
# runs every reproducer kept in tests/fuzz/crashes/TARGET/ once, then each target for SECONDS
# (both at once, one per core) on a working corpus in build-fuzz/corpus/TARGET, seeded from
# tests/fuzz/corpus/TARGET.
#
#   sh scripts/fuzz.sh [SECONDS]     default $FT_FUZZ_SECONDS, else 60; e.g. 3600 for an hour;
#                                    0 skips fuzzing
#
# A crash, leak, timeout or sanitizer finding fails the run; libFuzzer's report is printed and
# the input is left in build-fuzz/artifacts/ (keep it in tests/fuzz/crashes/TARGET/). Without
# clang or its libFuzzer runtime (Debian: clang, libclang-rt-14-dev; scripts/setup.sh installs
# them) the run says "fuzz: skipped" and exits 0. CC picks the compiler (default clang).
set -eu
cd "$(dirname "$0")/.."
seconds=${1:-${FT_FUZZ_SECONDS:-60}}
case $seconds in '' | *[!0-9]*) echo "fuzz: SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;; esac
if [ "$seconds" -eq 0 ]; then
  echo "fuzz: skipped: 0 seconds asked for (FT_FUZZ_SECONDS=0)"
  exit 0
fi
cc=${CC:-clang}
out=build-fuzz
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -d "$cuda/bin" ] && PATH="$cuda/bin:$PATH"

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
  'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
  'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' >"$probe/p.c"
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "fuzz: skipped: no $cc (Debian: apt-get install clang libclang-rt-14-dev)"
  exit 0
fi
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >"$probe/log" 2>&1; then
  echo "fuzz: skipped: $cc cannot link libFuzzer (Debian: apt-get install libclang-rt-14-dev): $(head -n 1 "$probe/log")"
  exit 0
fi

CC=$cc cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFT_FUZZ=ON -DFT_BUILD_TESTS=OFF >/dev/null
cmake --build "$out" --target fuzz_pack fuzz_spec

status=0
for t in pack spec; do
  mkdir -p "$out/corpus/$t" "$out/artifacts"
  # the reproducers of crashes found before: each must now be handled without a finding
  for f in "tests/fuzz/crashes/$t"/*; do
    [ -f "$f" ] || continue
    if "$out/tests/fuzz/fuzz_$t" -timeout=20 -runs=1 "$f" >"$out/repro.log" 2>&1; then
      echo "fuzz: $f: handled"
    else
      cat "$out/repro.log"
      echo "fuzz: $f: still a finding in fuzz_$t" >&2
      status=1
    fi
  done
done

# libFuzzer's options: 20 s for one input is a hang (a spec loads in milliseconds); SECONDS in all; the dictionary of the
# format's words; new inputs into the working corpus, findings into artifacts/.
run() { # run TARGET
  "$out/tests/fuzz/fuzz_$1" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="tests/fuzz/$1.dict" -artifact_prefix="$out/artifacts/$1-" \
    "$out/corpus/$1" "tests/fuzz/corpus/$1" >"$out/fuzz_$1.log" 2>&1
}
echo "fuzz: running fuzz_pack and fuzz_spec for $seconds s each"
run pack &
pack_pid=$!
run spec &
spec_pid=$!
for t in pack spec; do
  rc=0
  if [ $t = pack ]; then wait $pack_pid || rc=$?; else wait $spec_pid || rc=$?; fi
  if [ $rc -ne 0 ]; then
    cat "$out/fuzz_$t.log"
    echo "fuzz: fuzz_$t found a problem (status $rc); the input: $(find "$out/artifacts" -name "$t-*" | tr '\n' ' ')" >&2
    status=1
  else
    stats=$(grep -E '^stat::(number_of_executed_units|new_units_added)' "$out/fuzz_$t.log" | sed 's/^stat:://; s/: */: /' | tr '\n' ' ')
    echo "fuzz: fuzz_$t: no finding in $seconds s ($stats; $(find "$out/corpus/$t" -type f | wc -l) inputs in $out/corpus/$t)"
  fi
done
exit $status
