#!/bin/sh
# A small real tune on the GPU: every measurement recorded, a winner per bucket, and a second
# tune that resumes with nothing to do. "skipped" (status 77) without a GPU.
# Then the example application dispatches through that database: it must say it runs a tuned
# kernel and get the right answer; without the database, the built-in default.
#   gpu_tune.sh path/to/flashtune path/to/attention-example
ft=$1
if ! "$ft" devices --gpus-only >/dev/null 2>&1; then
  echo "skipped: no GPU ($("$ft" devices --gpus-only 2>&1 | head -n 1))"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
only='d=64,bm=128,warps=4,stages=2,dtype=f16,qreg=0'   # 10 variants kept, 6 workloads x 2 causal
"$ft" tune --search exhaustive --db "$dir/t.db" --only "$only" -q > "$dir/out" 2>&1 || { cat "$dir/out"; echo "tune failed"; exit 1; }
cat "$dir/out"
grep -q 'tuned .*: 12 buckets, 10 variants' "$dir/out" || { echo "unexpected summary"; exit 1; }
grep -q 'measured 60, already in the database 0: 60 ok' "$dir/out" || { echo "expected 60 ok measurements"; exit 1; }
grep -q '^winners: 12 buckets' "$dir/out" || { echo "expected 12 winners"; exit 1; }
"$ft" tune --search exhaustive --db "$dir/t.db" --only "$only" -q > "$dir/out" 2>&1 || { cat "$dir/out"; echo "second tune failed"; exit 1; }
grep -q 'measured 0, already in the database 60' "$dir/out" || { cat "$dir/out"; echo "the second tune re-measured"; exit 1; }
"$ft" query --db "$dir/t.db" --d 64 | tee "$dir/q"
[ "$(grep -c ' winner' "$dir/q")" = 12 ] || { echo "query: expected 12 winners"; exit 1; }
if [ -n "${2:-}" ]; then
  FLASHTUNE_DB="$dir/t.db" FLASHTUNE_DEBUG=1 "$2" > "$dir/ex" 2>&1 || { cat "$dir/ex"; echo "the example failed"; exit 1; }
  cat "$dir/ex"
  grep -q 'tuned for the nearest bucket.*: d=64,' "$dir/ex" || { echo "the example did not run a tuned kernel"; exit 1; }
  FLASHTUNE_DB="$dir/none.db" FLASHTUNE_DEBUG=1 "$2" > "$dir/ex" 2>&1 || { cat "$dir/ex"; echo "the example failed"; exit 1; }
  cat "$dir/ex"
  grep -q 'built-in default' "$dir/ex" || { echo "without a database the example should use the default"; exit 1; }
fi
echo "gpu tune: ok"
