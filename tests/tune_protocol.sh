#!/bin/sh
# The tuner against a worker that breaks the protocol (tests/fake_worker.c, FAKE_BAD): every
# tune ends within a time bound, with the expected exit status, no bad winner in the database,
# the broken measurements recorded as faults, and no worker process left behind.
#   tune_protocol.sh path/to/flashtune path/to/fake_worker
set -u
ft=$1
export FLASHTUNE_WORKER=$2
dir=$(mktemp -d)
pids=$dir/pids
cleanup() {
  # a test that failed may leave workers behind: end those this script started, by id
  [ -f "$pids" ] && while read -r p; do kill -9 "$p" 2>/dev/null; done < "$pids"
  rm -rf "$dir"
}
trap cleanup EXIT
db=$dir/tuning.db
only='d=32,bm=64,bn=64,warps=4,dtype=f16,stages=2'   # 8 variants, 2 workloads x 2 causal: 16 measurements
bad_kernel=qreg1_overlap1                            # one variant of each causality: 4 measurements
fail() { echo "tune_protocol: $*"; [ -f "$dir/out" ] && cat "$dir/out"; exit 1; }
count() { sqlite3 "$db" "$1"; }
# alive PID: the process exists and is not a zombie
alive() { s=$(ps -o stat= -p "$1" 2>/dev/null); [ -n "$s" ] && [ "${s#Z}" = "$s" ]; }
no_worker_left() {
  [ -f "$pids" ] || fail "$1: no worker was started"
  while read -r p; do
    alive "$p" && fail "$1: worker $p is still running after the tune"
  done < "$pids"
  rm -f "$pids"
}
# tune LIMIT ARGS...: runs a tune killed after LIMIT seconds; sets rc and secs
tune() {
  limit=$1
  shift
  t0=$(date +%s)
  FAKE_PIDS=$pids timeout -s KILL "$limit" "$ft" tune flash_fwd --db "$db" --only "$only" -q -j 2 "$@" > "$dir/out" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  [ $rc -ne 137 ] || fail "the tune did not end within $limit s"
  return $rc
}
# the checks every misbehaving measurement must pass: a fault (or timeout) for the bad
# kernel in each of the 4 buckets, the rest ok, 4 winners of status ok, none the bad kernel
expect_faults() {
  what=$1 status=$2
  [ "$(count "select count(*) from results r join kernels k on k.id = r.kernel_id
                where k.variant like '%qreg=1,overlap=1' and r.status = '$status' and r.median_ms is null")" = 4 ] ||
    fail "$what: the bad kernel's 4 measurements are not recorded as $status without a time"
  [ "$(count "select count(*) from results where status = 'ok'")" = 12 ] || fail "$what: expected 12 ok results"
  [ "$(count 'select count(*) from results')" = 16 ] || fail "$what: expected 16 results"
  [ "$(count 'select count(*) from v_winners')" = 4 ] || fail "$what: expected 4 winners"
  [ "$(count "select count(*) from v_winners where status != 'ok' or not (median_ms > 0.001) or variant like '%qreg=1,overlap=1'")" = 0 ] ||
    fail "$what: a bad measurement won a bucket"
  no_worker_left "$what"
}

# 0. The clean run these are compared with (also compiles the 8 variants into the cache).
tune 300 || fail "the clean tune failed"
grep -q 'measured 16, already in the database 0: 16 ok' "$dir/out" || fail "clean: expected 16 ok"
grep -q 'worker restarts: 0; protocol errors: 0' "$dir/out" || fail "clean: expected no restart"
no_worker_left clean
echo "clean tune: ok"

# 1. Replies that break the protocol: each bad measurement is tried on a fresh worker once
#    more, then recorded as a fault; the tune goes on and exits 0.
for mode in long flood neg zero tiny nan inf quartiles reps0 repsfrac l2 tflops timing junk unknown dup status \
            escape unsolicited wrongid noid; do
  rm -f "$db"
  FAKE_BAD=$mode FAKE_BAD_MATCH=$bad_kernel tune 60 --timeout 10
  [ $rc -eq 0 ] || fail "$mode: exit status $rc"
  [ $secs -le 20 ] || fail "$mode: the tune took $secs s"
  grep -q 'measured 16, already in the database 0: 12 ok, 0 wrong result, 0 compile error, 0 over limits, 0 launch failure, 4 fault, 0 timeout' "$dir/out" ||
    fail "$mode: unexpected summary"
  grep -q 'worker restarts: 8; protocol errors: 8' "$dir/out" || fail "$mode: expected 8 protocol errors and restarts"
  [ "$(count "select count(*) from results where status = 'fault' and reason like 'the worker broke the protocol twice: %'")" = 4 ] ||
    fail "$mode: the faults do not say that the worker broke the protocol"
  expect_faults "$mode" fault
  echo "$mode: recorded as faults in ${secs} s: ok"
done
sqlite3 "$db" "select reason from results where status = 'fault' limit 1"

# 2. A reply that trickles in one byte a second still times out.
rm -f "$db"
FAKE_BAD=trickle FAKE_BAD_MATCH=$bad_kernel tune 60 --timeout 2
[ $rc -eq 0 ] || fail "trickle: exit status $rc"
[ $secs -le 20 ] || fail "trickle: the tune took $secs s (4 timeouts of 2 s)"
grep -q '12 ok, .* 0 fault, 4 timeout' "$dir/out" || fail "trickle: expected 4 timeouts"
expect_faults trickle timeout
echo "trickle: timed out in ${secs} s: ok"

# 3. A worker gone deaf after a good reply: the next command never reaches it, and is sent again
#    to a new worker instead of being recorded as the next kernel's fault.
rm -f "$db"
FAKE_BAD=deaf FAKE_BAD_MATCH=$bad_kernel tune 60
[ $rc -eq 0 ] || fail "deaf: exit status $rc"
grep -q 'measured 16, already in the database 0: 16 ok' "$dir/out" || fail "deaf: expected 16 ok"
# 4 after its measurements (the race command that follows never reaches the worker and goes to
# the new one), 2 after the races it takes part in (the runner-up of the non-causal buckets: the
# next bucket's shape goes to a new worker likewise)
grep -q 'worker restarts: 6; protocol errors: 0' "$dir/out" || fail "deaf: expected 6 restarts"
no_worker_left deaf
echo "deaf: commands sent again: ok"

# 4. A worker that breaks the protocol with every reply: the tune gives up after 8 in a row
#    (exit 1, a clear message), keeps what it recorded, and no winner comes of it.
rm -f "$db"
FAKE_BAD=noid tune 60
[ $rc -eq 1 ] || fail "noid everywhere: exit status $rc, not 1"
grep -q 'GPU 0: the worker broke the protocol 8 times in a row (last: ' "$dir/out" || fail "noid everywhere: no clear message"
[ "$(count "select count(*) from results where status = 'fault'")" = 4 ] || fail "noid everywhere: expected 4 faults"
[ "$(count "select count(*) from results where status != 'fault'")" = 0 ] || fail "noid everywhere: other results"
[ "$(count 'select count(*) from v_winners')" = 0 ] || fail "noid everywhere: a winner"
no_worker_left "noid everywhere"
echo "a worker that always breaks the protocol: stopped: ok"

# 5. A bad ready line: a clear error, no database created, no worker left.
for mode in ready_long ready_bad; do
  rm -f "$db"
  FAKE_BAD=$mode tune 60
  [ $rc -eq 1 ] || fail "$mode: exit status $rc, not 1"
  grep -q "flashtune tune: GPU 0: the worker's ready line" "$dir/out" || fail "$mode: no clear message"
  [ -e "$db" ] && fail "$mode: the failed tune created the database"
  no_worker_left "$mode"
  echo "$mode: refused: ok"
done

# 6. A bad answer to a shape: tried once more, then the bucket is skipped with a message.
rm -f "$db"
FAKE_BAD=shape_bad FAKE_BAD_MATCH='sq=1024' tune 60
[ $rc -eq 0 ] || fail "shape_bad: exit status $rc"
[ "$(grep -c 'flashtune tune: bucket f16 d=32 causal=[01] seqlen 1024: the worker broke the protocol twice: ' "$dir/out")" = 2 ] ||
  fail "shape_bad: the two buckets of seqlen 1024 are not reported as skipped"
grep -q 'measured 8, already in the database 0: 8 ok' "$dir/out" || fail "shape_bad: expected 8 measurements"
[ "$(count 'select count(*) from results where seqlen_q = 1024')" = 0 ] || fail "shape_bad: results for a skipped bucket"
no_worker_left shape_bad
echo "shape_bad: buckets skipped: ok"

# 7. SIGTERM while a measurement hangs: the first one ends the tune (exit 130), what was
#    committed is kept, the worker is killed and reaped; the next tune does the rest.
rm -f "$db" "$dir/log"
FAKE_PIDS=$pids FAKE_LOG=$dir/log FAKE_HANG=$bad_kernel "$ft" tune flash_fwd --db "$db" --only "$only" -q -j 2 --timeout 600 \
  > "$dir/out" 2>&1 &
tuner=$!
i=0
until grep -q "$bad_kernel" "$dir/log" 2>/dev/null; do
  i=$((i + 1))
  [ $i -le 600 ] || { kill -9 $tuner; fail "SIGTERM: the hanging kernel was never measured"; }
  sleep 0.1
done
t0=$(date +%s)
kill -TERM $tuner
i=0
while kill -0 $tuner 2>/dev/null; do
  i=$((i + 1))
  [ $i -le 100 ] || { kill -9 $tuner; fail "SIGTERM: the tuner did not end within 10 s of one SIGTERM"; }
  sleep 0.1
done
wait $tuner
rc=$?
[ $rc -eq 130 ] || fail "SIGTERM: exit status $rc, not 130"
grep -q 'interrupted' "$dir/out" || fail "SIGTERM: no message"
got=$(count 'select count(*) from results')
[ "$got" -ge 1 ] || fail "SIGTERM: the measurements before it were not kept"
[ "$(count "select count(*) from results where status != 'ok'")" = 0 ] || fail "SIGTERM: the interrupted measurement was recorded"
no_worker_left SIGTERM
tune 60
[ $rc -eq 0 ] || fail "SIGTERM: the resumed tune failed"
grep -q "measured $((16 - got)), already in the database $got" "$dir/out" || fail "SIGTERM: the resumed tune re-measured"
no_worker_left "SIGTERM, resumed"
echo "SIGTERM during a hung measurement: exit 130 in $(( $(date +%s) - t0 )) s, $got kept: ok"

# 8. Ctrl-C reaches the worker too, perhaps before the tuner sees it: a worker that dies of
#    SIGINT interrupts the tune (exit 130), and the measurement it was making is not blamed.
rm -f "$db" "$dir/log"
FAKE_PIDS=$pids FAKE_LOG=$dir/log FAKE_HANG=$bad_kernel "$ft" tune flash_fwd --db "$db" --only "$only" -q -j 2 --timeout 600 \
  > "$dir/out" 2>&1 &
tuner=$!
i=0
until grep -q "$bad_kernel" "$dir/log" 2>/dev/null; do
  i=$((i + 1))
  [ $i -le 600 ] || { kill -9 $tuner; fail "SIGINT: the hanging kernel was never measured"; }
  sleep 0.1
done
kill -INT "$(tail -n 1 "$pids")"
i=0
while kill -0 $tuner 2>/dev/null; do
  i=$((i + 1))
  [ $i -le 100 ] || { kill -9 $tuner; fail "SIGINT: the tuner did not end within 10 s of its worker's SIGINT"; }
  sleep 0.1
done
wait $tuner
rc=$?
[ $rc -eq 130 ] || fail "SIGINT to the worker: exit status $rc, not 130"
grep -q "interrupted: GPU 0's worker was stopped (signal 2)" "$dir/out" || fail "SIGINT to the worker: no message"
[ "$(count "select count(*) from results where status != 'ok'")" = 0 ] || fail "SIGINT to the worker: a kernel was blamed"
no_worker_left "SIGINT to the worker"
echo "SIGINT to the worker: an interrupt, no kernel blamed: ok"

# 9. A worker that ignores quit and the end of its input is killed at the end of the tune.
rm -f "$db"
FAKE_STUBBORN=1 tune 60
[ $rc -eq 0 ] || fail "stubborn: exit status $rc"
[ $secs -le 15 ] || fail "stubborn: the tune took $secs s"
no_worker_left stubborn
echo "a worker that will not quit: killed: ok"
