# Sourced by bench/device_*.sh on the GPU machine: the staged build in $RUN (bench/stage_run.sh's
# folder, default .dev/run) on the library path, logs under $OUT (default /tmp/ft-out) with one
# line a step in $OUT/summary.txt (note), and the run's record: the GPU and its clocks
# ($OUT/gpu.txt) and the checkout's commit when the build was staged ($OUT/commit.txt, from the
# COMMIT file stage_run.sh writes: the device's copy of the checkout is no git repository of it).
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
