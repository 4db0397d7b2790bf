#!/bin/bash
# One call on the GPU machine (an H200) for the Hopper family: a tune of every variant of
# specs/flash_fwd_sm90.lua into a database (seeded with SEED_DB, e.g. an earlier tune of the
# sm80 family, so the winners are chosen across both families), the winners, the GPU tests,
# compute-sanitizer on sm90 variants, the SASS and resources of the winners, and the dispatch
# overhead. Expects a build folder made with -DFT_STATIC_DEPS=ON (BUILD, default build-dev).
# Writes logs and JSON under OUT and a short summary last.
set -u
BUILD=${BUILD:-build-dev}
OUT=${OUT:-/tmp/ft-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/$BUILD/deps:${LD_LIBRARY_PATH:-}
export FLASHTUNE_CACHE_DIR=/tmp/ft-cache FLASHTUNE_LIB=$PWD/$BUILD/libflashtune.so PYTHONUNBUFFERED=1
ft=$BUILD/flashtune
summary=$OUT/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"

# 1. The tune: both families' results in one database, a winner per bucket.
db=$OUT/tuning.db
[ -n "${SEED_DB:-}" ] && cp "$SEED_DB" "$db"
t1=$(date +%s)
timeout "${TUNE_LIMIT:-300}" "$ft" tune flash_fwd_sm90 --db "$db" -q > "$OUT/tune.txt" 2>&1
note "tune flash_fwd_sm90: rc=$? in $(( $(date +%s) - t1 )) s; $(grep -E '^(measured|time)' "$OUT/tune.txt" | tr '\n' ' ')"
"$ft" query --db "$db" > "$OUT/winners.txt" 2>&1
"$ft" query --db "$db" --all --json > "$OUT/all.jsonl" 2>&1
note "winners: $(grep -c ' winner' "$OUT/winners.txt"), of which sm90: $(grep ' winner' "$OUT/winners.txt" | grep -c pingpong=)"

# 2. The GPU tests, as ctest runs them (label gpu).
if [ -z "${SKIP_TESTS:-}" ]; then
  "$BUILD/tests/test_gpu" > "$OUT/test_gpu.txt" 2>&1
  note "test_gpu: rc=$? $(grep -c '^ok' "$OUT/test_gpu.txt") ok, $(grep -c '^FAIL' "$OUT/test_gpu.txt") failed"
  sh tests/gpu_tune.sh "$ft" "$BUILD/attention" > "$OUT/gpu_tune.txt" 2>&1
  note "gpu_tune: rc=$?"
  python3 tests/test_python.py > "$OUT/test_python.txt" 2>&1
  note "gpu_python: rc=$? $(tail -n 1 "$OUT/test_python.txt")"
  FLASHTUNE_CACHE_DIR=/tmp/ft-pack-cache sh tests/pack.sh "$ft" "$BUILD/tests/fake_worker" cc "$BUILD/libflashtune.so" \
    > "$OUT/pack.txt" 2>&1
  note "pack_cli (with GPU): rc=$? $(tail -n 1 "$OUT/pack.txt")"
fi

# 3. compute-sanitizer on sm90 variants: odd lengths, grouped-query heads, causal with sq != sk.
for v in ${SANITIZE_VARIANTS:-'d=128,bm=128,bn=176,stages=2,causal=1,dtype=f16,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1' 'd=64,bm=192,bn=64,stages=3,causal=0,dtype=bf16,pingpong=0,overlap=0,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1'}; do
  [ "$v" = none ] && break
  d=${v#d=}; d=${d%%,*}
  for tool in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$ft" run --spec flash_fwd_sm90 --no-time \
      --variant "$v" --shape "b=1,hq=4,hkv=2,sq=300,sk=257,d=$d" >> "$OUT/sanitizer.txt" 2>&1
    note "sanitizer $tool $v: rc=$?"
  done
done

# 4. SASS and resources of the most frequent sm90 winners.
grep ' winner' "$OUT/winners.txt" | grep -o 'd=[0-9]*,bm=[^ ]*pingpong=[01],overlap=[01],balance=[01]' | sort | uniq -c | sort -rn |
  head -n "${SASS_COUNT:-4}" | while read -r n v; do
  "$ft" gen flash_fwd_sm90 --arch sm_90a --variant "$v" > /tmp/k.cu &&
    nvcc -arch=sm_90a -cubin -Xptxas -v -o /tmp/k.cubin /tmp/k.cu > /tmp/k.log 2>&1 &&
    cuobjdump -sass /tmp/k.cubin > /tmp/k.sass &&
    note "sass ($n wins) $v: $(for op in HGMMA UTMALDG MUFU.EX2 SYNCS BAR LDL STL; do printf '%s=%s ' $op $(grep -c "$op" /tmp/k.sass); done)$(grep -o '[0-9]* bytes spill stores' /tmp/k.log)"
done

# 5. Dispatch overhead and cold start (the sm80 family's kernel, and a TMA kernel of the sm90 family).
if [ -z "${SKIP_OVERHEAD:-}" ]; then
  timeout 120 "$BUILD/ft_overhead" --json "$OUT/overhead.json" > "$OUT/overhead.txt" 2>&1
  note "overhead (sm80 kernel): rc=$?"; tail -n 8 "$OUT/overhead.txt" | tee -a "$summary"
  timeout 120 "$BUILD/ft_overhead" --spec flash_fwd_sm90 --variant 'bm=128,bn=128,stages=2,pingpong=1,overlap=1,balance=0' \
    --json "$OUT/overhead_sm90.json" > "$OUT/overhead_sm90.txt" 2>&1
  note "overhead (sm90 kernel): rc=$?"; tail -n 8 "$OUT/overhead_sm90.txt" | tee -a "$summary"
fi
note "total: $(( $(date +%s) - t0 )) s"
