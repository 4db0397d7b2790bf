# Sourced by bench/device_*.sh on the GPU machine: the staged build in $RUN (bench/stage_run.sh's
# folder, default .dev/run) on the library path, logs under $OUT (default /tmp/ft-out) with one
# line a step in $OUT/summary.txt (note), and the run's record: the GPU and its clocks
# ($OUT/gpu.txt) and the checkout's commit when the build was staged ($OUT/commit.txt, from the
# COMMIT file stage_run.sh writes: the device's copy of the checkout is no git repository of it).
# The steps the scripts share: verify, sanitize, gpu_tests.
RUN=$(cd "${RUN:-.dev/run}" && pwd)
OUT=${OUT:-/tmp/ft-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$RUN:$RUN/deps:${LD_LIBRARY_PATH:-}
export FLASHTUNE_CACHE_DIR=${FLASHTUNE_CACHE_DIR:-/tmp/ft-cache} FLASHTUNE_LIB=$RUN/libflashtune.so PYTHONUNBUFFERED=1
ft=$RUN/flashtune
summary=$OUT/summary.txt
note() { echo "$*" | tee -a "$summary"; }
since() { echo $(( $(date +%s) - $1 )); }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > "$OUT/gpu.txt"
cp "$RUN/COMMIT" "$OUT/commit.txt" 2>/dev/null || echo "unknown (no $RUN/COMMIT)" > "$OUT/commit.txt"

# verify NAME SPEC FILTER: flashtune verify of SPEC's variants matching FILTER (VERIFY_LIMIT
# seconds at most), the log in $OUT/verify_NAME.txt, its summary and first failures noted.
verify() {
  local t0
  t0=$(date +%s)
  timeout "${VERIFY_LIMIT:-150}" "$ft" verify "$2" -q --only "$3" > "$OUT/verify_$1.txt" 2>&1
  note "verify $2 --only $3: exit $? in $(since "$t0") s: $(grep -E '^summary' "$OUT/verify_$1.txt" | tail -1)"
  grep -E ' FAIL ' "$OUT/verify_$1.txt" | head -n 5 | tee -a "$summary"
}

# sanitize NAME SPEC FILTER: compute-sanitizer's memcheck, racecheck and synccheck, each under
# flashtune verify of SPEC's variants matching FILTER (SANITIZE_LIMIT seconds at most), the logs
# in $OUT/sanitize_NAME_TOOL.txt, each tool's summary line noted.
sanitize() {
  local t0 tool log
  for tool in memcheck racecheck synccheck; do
    t0=$(date +%s)
    log=$OUT/sanitize_$1_$tool.txt
    timeout "${SANITIZE_LIMIT:-100}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$ft" verify "$2" -q \
      --only "$3" > "$log" 2>&1
    note "compute-sanitizer $tool verify $2 --only $3: exit $? in $(since "$t0") s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
  done
}

# ncu_profile LABEL REP REGEX SKIP COUNT -- COMMAND...: Nsight Compute's full set on COMMAND's
# kernels whose names match REGEX (COUNT of them after SKIP launches; PROFILE_LIMIT seconds at
# most), then its raw and SASS source pages (REP.raw.csv.gz, REP.sass.csv.gz, for
# bench/ncu_compare.py) and details page (REP.details.txt); the report itself is removed.
ncu_profile() {
  local label=$1 rep=$2 names=$3 skip=$4 count=$5 t0
  shift 6
  t0=$(date +%s)
  timeout "${PROFILE_LIMIT:-240}" ncu --clock-control none --set full --import-source no \
    --kernel-name "regex:$names" --launch-skip "$skip" --launch-count "$count" -f -o "$rep" "$@" > "$rep.log" 2>&1
  note "ncu $label: exit $? in $(since "$t0") s: $(grep -E 'calls' "$rep.log" | tail -1)"
  ncu -i "$rep.ncu-rep" --page raw --csv 2> /dev/null | gzip > "$rep.raw.csv.gz"
  ncu -i "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1
  ncu -i "$rep.ncu-rep" --page source --csv --print-source sass 2> /dev/null | gzip > "$rep.sass.csv.gz"
  rm -f "$rep.ncu-rep"
  grep -E '^  [A-Za-z_].*\(|Duration' "$rep.details.txt" | head -n 12 | tee -a "$summary"
}

# gpu_tests: tests/test_gpu of the staged build and tests/test_python_bwd, counts noted.
gpu_tests() {
  local t0
  t0=$(date +%s)
  # GPU_TESTS: the test_gpu cases to run (parts of their names), e.g. test_public_backward in a
  # call of its own (the whole program took over 437 s on an H100, 2026-12-06)
  # shellcheck disable=SC2086
  "$RUN/tests/test_gpu" ${GPU_TESTS:-} > "$OUT/test_gpu.txt" 2>&1
  note "test_gpu: exit $? in $(since "$t0") s ($(grep -c '^ok' "$OUT/test_gpu.txt") ok, $(grep -c '^FAIL' "$OUT/test_gpu.txt") FAIL)"
  grep -E '^FAIL|FAIL ' "$OUT/test_gpu.txt" | head -n 5 | tee -a "$summary"
  t0=$(date +%s)
  python3 tests/test_python_bwd.py > "$OUT/test_python_bwd.txt" 2>&1
  note "test_python_bwd: exit $? in $(since "$t0") s ($(tail -1 "$OUT/test_python_bwd.txt"); $(grep -c ': ok$' "$OUT/test_python_bwd.txt") ok, $(grep -c ': FAIL$' "$OUT/test_python_bwd.txt") FAIL)"
}

# vs_fa4 PASS SHAPES PREFIX SKIP COUNT CALLS: ncu_profile of flashtune's and FlashAttention-4's
# kernels of one pass (fwd: ft_flash_fwd and Forward; bwd: ft_flash_bwd and Backward) at each
# D/SEQLEN/CAUSAL of SHAPES (bench/profile_call.py, CALLS calls after its warm-up), the reports
# as OUT/PREFIX_SYSTEM_dD_sSEQLEN_cCAUSAL (for bench/ncu_compare.py A B). VSFA4_KNOBS (backward):
# flashtune's side is its default with those knobs changed (profile_call.py --knobs), e.g.
# bm=80,early_dv=2 for the 80-row tile FA4 takes at d = 128 non-causal.
vs_fa4() {
  local pass=$1 shapes=$2 prefix=$3 skip=$4 count=$5 calls=$6 shape d sl c sys names extra
  for shape in $shapes; do
    IFS=/ read -r d sl c <<< "$shape"
    for sys in flashtune fa4; do
      extra=()
      [ "$sys" = flashtune ] && [ -n "${VSFA4_KNOBS:-}" ] && extra=(--knobs "$VSFA4_KNOBS")
      names=ft_flash_$pass
      [ "$sys" = fa4 ] && { [ "$pass" = fwd ] && names=Forward || names=Backward; }
      ncu_profile "$sys $pass d=$d s=$sl causal=$c" "$OUT/${prefix}_${sys}_d${d}_s${sl}_c$c" "$names" "$skip" "$count" -- \
        python3 bench/profile_call.py --pass "$pass" --system "$sys" --calls "$calls" --head-dim "$d" --seqlen "$sl" \
        --causal "$c" "${extra[@]}"
    done
  done
}
