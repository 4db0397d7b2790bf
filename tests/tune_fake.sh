#!/bin/sh
# The tuner end to end with a stand-in worker (tests/fake_worker.c), no GPU needed.
#   tune_fake.sh path/to/flashtune path/to/fake_worker
set -u
ft=$1
export FLASHTUNE_WORKER=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
db=$dir/tuning.db
only='d=64,bm=64,bn=64,warps=4,dtype=f16'   # 20 compiled variants, 6 workloads x 2 causal
fail() { echo "tune_fake: $*"; [ -f "$dir/out" ] && cat "$dir/out"; exit 1; }
tune() { "$ft" tune --search exhaustive flash_fwd --db "$db" --only "$only" -q -j 2 "$@" > "$dir/out" 2>&1; }
count() { sqlite3 "$db" "$1"; }

# 1. A clean tune records every measurement, one winner per bucket.
tune || fail "first tune failed"
grep -q 'tuned Fake GPU: 12 buckets, 20 variants' "$dir/out" || fail "unexpected summary"
grep -q 'measured 120, already in the database 0: 120 ok' "$dir/out" || fail "expected 120 measurements"
[ "$(count 'select count(*) from results')" = 120 ] || fail "the database does not hold 120 results"
[ "$(count 'select count(*) from v_winners')" = 12 ] || fail "expected 12 winners"
echo "clean tune: ok"

# 2. Tuning again measures nothing.
tune || fail "second tune failed"
grep -q 'measured 0, already in the database 120' "$dir/out" || fail "the second tune re-measured"
echo "resume with nothing left: ok"
# ... and says so in JSON with --json (one line, on stdout)
tune --json || fail "tune --json failed"
grep -q '^{"kind": "summary", "device": "Fake GPU", .*"buckets": 12, "variants": 20, .*"measured": 0, "resumed": 120, "results": {"ok": 0,' "$dir/out" ||
  fail "tune --json printed no summary line"
echo "tune --json: ok"

# 3. Ctrl-C after 25 measurements: exit 130, 25 kept, the next tune does the other 95 only.
rm -f "$db"
FAKE_INTERRUPT_AFTER=25 tune; rc=$?
[ $rc -eq 130 ] || fail "an interrupted tune should exit 130, not $rc"
got=$(count 'select count(*) from results')
[ "$got" -ge 25 ] && [ "$got" -le 26 ] || fail "after the interrupt the database holds $got results, not 25"
tune || fail "the resumed tune failed"
grep -q "measured $((120 - got)), already in the database $got" "$dir/out" || fail "the resumed tune re-measured"
[ "$(count 'select count(*) from results')" = 120 ] || fail "after resuming, not 120 results"
echo "interrupt and resume ($got committed before the interrupt): ok"

# 4. A kernel that faults, one that crashes its worker, one that hangs, one that is wrong:
#    recorded as such, and the tune goes on.
rm -f "$db"
FAKE_FAULT=stages2_causal0_dtypef16_qreg0_overlap0 FAKE_CRASH=stages2_causal0_dtypef16_qreg1_overlap0 \
FAKE_HANG=stages3_causal1_dtypef16_qreg0_overlap0 FAKE_WRONG=stages1_causal1 \
  tune --timeout 2 || fail "the tune with faults failed"
[ "$(count "select count(*) from results where status='fault'")" = 12 ] || fail "expected 12 faults"
[ "$(count "select count(*) from results where status='timeout'")" = 6 ] || fail "expected 6 timeouts"
[ "$(count "select count(*) from results where status='wrong_result'")" = 12 ] || fail "expected 12 wrong results"
[ "$(count "select count(*) from results where status='ok'")" = 90 ] || fail "expected 90 ok"
grep -q 'worker restarts: 18' "$dir/out" || fail "expected 18 worker restarts"
[ "$(count "select count(*) from v_winners w join kernels k on k.id = w.kernel_id where w.status != 'ok'")" = 0 ] ||
  fail "a failed variant won"
echo "faults, crashes, hangs and wrong results: ok"

# 5. Two tuners (two GPUs) on one database at once: nothing lost, the file intact.
rm -f "$db"
FAKE_DEVICE="Fake GPU A" "$ft" tune --search exhaustive flash_fwd --db "$db" --only "$only" -q -j 1 > "$dir/a" 2>&1 &
pa=$!
FAKE_DEVICE="Fake GPU B" "$ft" tune --search exhaustive flash_fwd --db "$db" --only "$only" -q -j 1 > "$dir/b" 2>&1 &
pb=$!
wait $pa || { cat "$dir/a"; fail "tuner A failed"; }
wait $pb || { cat "$dir/b"; fail "tuner B failed"; }
[ "$(count 'select count(*) from results')" = 240 ] || fail "two tuners: expected 240 results"
[ "$(count 'pragma integrity_check')" = ok ] || fail "integrity check failed"
"$ft" devices --db "$db" > "$dir/out" 2>&1
grep -q 'Fake GPU A.*120 results, 12 winners' "$dir/out" && grep -q 'Fake GPU B.*120 results, 12 winners' "$dir/out" ||
  fail "devices does not list both"
echo "two tuners on one database: ok"

# 6. query: winners, filters, every measurement, JSON.
"$ft" query --db "$db" --device "GPU A" --d 64 --causal > "$dir/out" 2>&1 || fail "query failed"
grep -q '^6 rows from' "$dir/out" || fail "query --causal: expected 6 winners"
[ "$(grep -c ' winner' "$dir/out")" = 6 ] || fail "query: rows not marked winner"
"$ft" query --db "$db" --device "GPU B" --all --json > "$dir/out" 2>&1 || fail "query --all failed"
[ "$(grep -c '"status": "ok"' "$dir/out")" = 120 ] || fail "query --all --json: expected 120 rows"
"$ft" query --db "$dir/nothing.db" > "$dir/out" 2>&1 && fail "query on a missing database should fail"
printf 'not a database, just text\n%.0s' 1 2 3 4 5 6 7 8 9 10 > "$dir/junk.db"
"$ft" query --db "$dir/junk.db" > "$dir/out" 2>&1 && fail "query on a corrupt file should fail"
grep -q 'junk.db' "$dir/out" || fail "the corrupt-file error does not name the file"
echo "query: ok"

# 7. --device all: two identical GPUs share the buckets; different models are refused.
rm -f "$db"
FAKE_LOG="$dir/log" tune --device all || fail "--device all failed"
grep -q 'measured 120, already in the database 0: 120 ok' "$dir/out" || fail "--device all: expected 120 measurements"
n0=$(grep -c '^\[0\] measure' "$dir/log"); n1=$(grep -c '^\[1\] measure' "$dir/log")
[ "$n0" -gt 0 ] && [ "$n1" -gt 0 ] || fail "--device all: the work was not shared ($n0 and $n1 measurements)"
FAKE_ODD_DEVICE=1 tune --device all && fail "--device all with two models should fail"
grep -q 'needs identical GPUs' "$dir/out" || fail "--device all: no clear message for different GPUs"
echo "--device all ($n0 + $n1 measurements): ok"

# 8. A head dim the spec does not list (its d is open): --only d=112 adds it, and the tune
#    measures it on the workloads of the nearest head dim they have above it (d = 128's six).
rm -f "$db"
"$ft" tune --search exhaustive flash_fwd --db "$db" --only 'd=112,bm=64,bn=64,warps=4,dtype=f16' -q -j 2 > "$dir/out" 2>&1 ||
  fail "tune --only d=112 failed"
grep -q 'tuned Fake GPU: 12 buckets, 20 variants' "$dir/out" || fail "tune --only d=112: expected 12 buckets of 20 variants"
[ "$(count "select count(*) from results r join kernels k on k.id = r.kernel_id where k.variant like 'd=112,%' and r.status = 'ok'")" = 120 ] ||
  fail "tune --only d=112: expected 120 results of d=112 kernels"
[ "$(count "select count(distinct seqlen_q) from results")" = 6 ] || fail "tune --only d=112: expected d=128's six sequence lengths"
echo "a head dim the spec does not list (d=112): ok"

# 9. Only what some bucket measures is compiled: the spec lists d = 80 and 160, which its
#    workloads do not have, so of the 16 variants this filter keeps (8 head dims x 2 causal)
#    the 12 of d = 32, 64, 96, 128, 192 and 256 are compiled and measured.
rm -f "$db"
"$ft" tune --search exhaustive flash_fwd --db "$db" --only 'bm=64,bn=64,warps=4,stages=1,dtype=f16,qreg=0,overlap=0' -q -j 2 > "$dir/out" 2>&1 ||
  fail "the tune of six head dims failed"
grep -q 'tuned Fake GPU: 48 buckets, 12 variants' "$dir/out" || fail "expected 48 buckets of 12 variants (no d=80 or 160)"
[ "$(count "select count(*) from kernels where variant like 'd=80,%' or variant like 'd=160,%'")" = 0 ] ||
  fail "variants no bucket measures reached the database"
echo "only the variants the buckets measure are compiled: ok"

# 10. --search halving: every variant screened at a quarter of the budget (verified), the
#     fastest quarter of each bucket's (4 at least) measured again at the whole budget; the
#     winners are the exhaustive tune's (the stand-in worker's times do not depend on the budget).
rm -f "$db"
tune || fail "the exhaustive tune for the comparison failed"
count "select key, variant from v_winners order by key" > "$dir/exhaustive"
rm -f "$db"
FAKE_LOG="$dir/log" tune --search halving --budget 40 || fail "tune --search halving failed"
grep -q 'measured 168, already in the database 0: 168 ok' "$dir/out" || fail "halving: expected 120 screening and 48 whole measurements"
grep -q 'search: halving: 120 variants screened, 48 of them measured again at the whole budget' "$dir/out" ||
  fail "halving: no search line"
[ "$(grep -c '^\[0\] measure .* verify=1 budget=10 ' "$dir/log")" = 120 ] || fail "halving: expected 120 verified screenings at 10 ms"
[ "$(grep -c '^\[0\] measure .* verify=0 budget=40 ' "$dir/log")" -ge 48 ] || fail "halving: expected 48 measurements at 40 ms"
[ "$(count 'select count(*) from results')" = 120 ] || fail "halving: every variant keeps a result"
count "select key, variant from v_winners order by key" > "$dir/halving"
cmp -s "$dir/exhaustive" "$dir/halving" || fail "halving picked other winners than the exhaustive tune"
tune --search halving --json || fail "tune --search halving --json failed"
grep -q '"search": "halving", "screened": 0, "kept": 0' "$dir/out" || fail "halving --json: no search fields"
"$ft" tune flash_fwd --search fast > "$dir/out" 2>&1 && fail "--search fast should be a usage error"
grep -q "search takes exhaustive, halving or ranked, not 'fast'" "$dir/out" || fail "--search: no clear message"
"$ft" tune flash_fwd --db "$dir/default.db" --only "$only" -q -j 2 --json > "$dir/out" 2>&1 || fail "tune without --search failed"
grep -q '"search": "ranked"' "$dir/out" || fail "the default search is not the ranked one"
echo "--search halving (the exhaustive tune's winners): ok"

# 11. Compiling hides behind timing: the buckets go in groups of the same variants (here twelve:
#     six head dims x causal), and while one group is measured the next one compiles. With a
#     cold cache and measurements that take 400 ms (as on a GPU), the tune waits for the first
#     group's compilation and little else: under half of the compile time (about a sixth here).
rm -f "$db"
FAKE_DELAY_MS=400 "$ft" tune --search exhaustive flash_fwd --db "$db" --cache-dir "$dir/cold-cache" --json -q -j 2 \
  --only 'bm=64,bn=64,warps=4,stages=1,dtype=f16,qreg=0,overlap=0' > "$dir/out" 2>&1 || fail "the delayed tune failed"
compile=$(sed -n 's/.*"compile_ms": \([0-9.]*\).*/\1/p' "$dir/out")
wait=$(sed -n 's/.*"compile_wait_ms": \([0-9.]*\).*/\1/p' "$dir/out")
[ -n "$compile" ] && [ -n "$wait" ] || fail "no compile_ms and compile_wait_ms in the summary"
awk -v c="$compile" -v w="$wait" 'BEGIN { exit !(c > 0 && w >= 0 && w < 0.5 * c) }' ||
  fail "compiling did not hide behind timing: waited $wait ms of $compile ms"
grep -q '"buckets": 48, "variants": 12, .*"measured": 48, "resumed": 0, "results": {"ok": 48,' "$dir/out" ||
  fail "the delayed tune: expected 48 buckets of 12 variants, 48 ok"
echo "compiling behind timing (waited $wait ms of $compile ms): ok"

# 12. --search ranked: four groups of 30 variants (d = 64, bm = 64; f16 and bf16, causal or not).
#     f16 non-causal comes first: it compiles the 16 candidates of the prior (the 8 nearest to
#     the built-in defaults, then each time the farthest from those chosen) and is refined (the
#     variants one step from a bucket's 2 fastest, measured on every bucket). Each other group
#     has a measured twin (the same head dim, one of dtype and causality different; f16 causal
#     waits for f16 non-causal to be measured): it compiles the twins of the variants among the
#     4 fastest of some bucket of its twins (8 to 16, the better placed first; with a twin of its
#     causality, the bf16 groups, those only) and is not refined. 82 variants never compile. A group's smallest and largest bucket screen every candidate, the four between
#     them the 8 fastest of their measured neighbours (and a refinement's variants); but a bf16
#     bucket measures only the twins of the 4 fastest of its f16 twin's bucket of that shape,
#     at the whole budget at once (4 candidates: nothing to screen). With speeds that do not
#     depend on the dtype (FAKE_DTYPE_BLIND), each non-causal bf16 bucket's winner is its f16
#     twin's, and no causal bf16 winner is slower than its f16 twin's.
rm -f "$db"
export FAKE_DTYPE_BLIND=1
"$ft" tune flash_fwd --db "$db" --only 'd=64,bm=64' -q -j 2 --search ranked --prefetch-wait all \
  --cache-dir "$dir/ranked-cache" > "$dir/out" 2>&1 ||
  fail "tune --search ranked failed"
grep -q 'measured 262, already in the database 0: 262 ok' "$dir/out" || fail "ranked: expected 262 measurements"
grep -q 'search: ranked: 142 variants screened, 72 of them measured again at the whole budget' "$dir/out" ||
  fail "ranked: expected 142 screenings and 72 at the whole budget"
grep -q 'ranked: 82 variants not compiled' "$dir/out" || fail "ranked: expected 82 variants left uncompiled"
#     A refined group's buckets race once, after its last refinement (not once more after each):
#     24 races for 24 buckets.
grep -q '^winners: 24 buckets (24 races of the leaders' "$dir/out" ||
  fail "ranked: expected one race per bucket (the refined group's held for its last refinement)"
#     As each bucket's screening ended, the refinement's variants (5: f16 non-causal's kernels are
#     its 16 candidates and those) and the twin groups' candidates it chose were compiled ahead
#     into the cache; with --prefetch-wait all (each compilation waits for the whole queue) all
#     19 of them, none in vain (the cache holds the 38 kernels the tune compiled, no more).
grep -q "; 19 variants compiled ahead" "$dir/out" || fail "ranked: expected 19 variants compiled ahead"
[ "$(count "select count(*) from kernels where variant like '%causal=0,dtype=f16%'")" = 21 ] ||
  fail "ranked: f16 non-causal should have compiled its 16 candidates and the 5 of its refinement"
[ "$(find "$dir/ranked-cache" -type f | wc -l)" = 38 ] ||
  fail "ranked: the compile cache should hold the 38 kernels compiled, not $(find "$dir/ranked-cache" -type f | wc -l)"
[ "$(count 'select count(*) from kernels')" = 38 ] || fail "ranked: expected 38 kernels in the database"
f16c0="key like '%\"f16\"%' and key like '%\"causal\":0%'"
[ "$(count "select min(n) from (select count(*) n from results where $f16c0 and seqlen_q in (512, 16384) group by key)")" -gt 16 ] ||
  fail "ranked: f16 non-causal's smallest and largest buckets should screen the 16 candidates and a refinement"
[ "$(count "select max(n) from (select count(*) n from results where not ($f16c0) group by key)")" = 8 ] ||
  fail "ranked: a group with a measured twin should measure its 8 candidates at most"
[ "$(count "select count(*) from results where key like '%\"bf16\"%' group by key" | sort -u)" = 4 ] ||
  fail "ranked: a bf16 bucket should measure the twins of its f16 twin bucket's 4 fastest"
count "select distinct replace(variant, 'dtype=bf16', 'dtype=f16') from kernels where variant like '%causal=0,dtype=bf16%'" |
  sort > "$dir/bf16"
count "select distinct replace(variant, 'causal=1', 'causal=0') from kernels where variant like '%causal=1,dtype=f16%'" |
  sort > "$dir/f16c1"
count "select distinct variant from kernels where variant like '%causal=0,dtype=f16%'" | sort > "$dir/f16"
[ -s "$dir/bf16" ] && [ -z "$(comm -23 "$dir/bf16" "$dir/f16")" ] && [ -s "$dir/f16c1" ] &&
  [ -z "$(comm -23 "$dir/f16c1" "$dir/f16")" ] || fail "ranked: a candidate is no twin of a measured variant of its twin group"
count "select replace(key, '\"bf16\"', '\"f16\"'), replace(variant, 'dtype=bf16', 'dtype=f16') from v_winners
       where key like '%\"bf16\"%' and key like '%\"causal\":0%' order by 1" > "$dir/bf16-winners"
count "select key, variant from v_winners where $f16c0 order by 1" > "$dir/f16-winners"
count "select key, variant from v_winners order by 1" > "$dir/winners-all"
count "select variant from kernels order by 1" > "$dir/kernels-all"
[ "$(wc -l < "$dir/f16-winners")" = 6 ] && cmp -s "$dir/bf16-winners" "$dir/f16-winners" ||
  fail "ranked: a non-causal bf16 bucket's winner is not its f16 twin's"
[ "$(count "select count(*) from v_winners b join v_winners f on replace(b.key, '\"bf16\"', '\"f16\"') = f.key
            where b.key like '%\"bf16\"%' and b.key like '%\"causal\":1%' and b.median_ms <= f.median_ms * 1.0001")" = 6 ] ||
  fail "ranked: a causal bf16 winner is slower than its f16 twin's"
#     Tuned again, it measures nothing twice: the refinement goes on from the winners a step
#     further (as many new results as it measured).
before=$(count 'select count(*) from results')
"$ft" tune flash_fwd --db "$db" --only 'd=64,bm=64' -q -j 2 --search ranked --json > "$dir/out" 2>&1 ||
  fail "tune --search ranked --json failed"
grep -q '"search": "ranked", "screened": [0-9]*, "kept": [0-9]*, "ranked_out": [0-9]*, "left_to_newer": 0,' "$dir/out" ||
  fail "ranked --json: no search fields"
again=$(sed -n 's/.*"measured": \([0-9]*\),.*/\1/p' "$dir/out")
[ "$again" = $(( $(count 'select count(*) from results') - before )) ] && [ "$again" -lt 40 ] ||
  fail "ranked: the second tune measured $again, not only new results (and few of them)"
#     --prefetch-wait own (the default), from a cold cache again: a refinement's or twin group's compilation
#     waits only for its own jobs ahead (moved to the front), and a group compiled while another
#     is measured takes its waiting ones over. The same measurements, kernels and winners; of the
#     19 queued ahead, 5 to 19 compile there (the refinement's 5 at least; how many of the twin
#     groups' a compilation takes over depends on the threads' pace), none twice: the cache holds
#     the 38 kernels, no more.
#     Its --timeline: one span per compilation ahead (as many as the summary counts), each of
#     the four groups compiled and measured once (and only the refined group's refinement), no
#     span ending before it starts or after the tune's wall time.
rm -f "$db"
started=$(date +%s)
"$ft" tune flash_fwd --db "$db" --only 'd=64,bm=64' -q -j 2 --search ranked \
  --cache-dir "$dir/own-cache" --timeline "$dir/timeline" > "$dir/out" 2>&1 ||
  fail "tune --search ranked (--prefetch-wait own) failed"
wall=$(( $(date +%s) - started + 1 ))
grep -q 'measured 262, already in the database 0: 262 ok' "$dir/out" || fail "prefetch-wait own: expected 262 measurements"
ahead=$(sed -n 's/.*; \([0-9]*\) variants compiled ahead.*/\1/p' "$dir/out")
[ -n "$ahead" ] && [ "$ahead" -ge 5 ] && [ "$ahead" -le 19 ] ||
  fail "prefetch-wait own: expected 5 to 19 variants compiled ahead, not '$ahead'"
[ "$(find "$dir/own-cache" -type f | wc -l)" = 38 ] ||
  fail "prefetch-wait own: the cache should hold the 38 kernels compiled, not $(find "$dir/own-cache" -type f | wc -l)"
count "select variant from kernels order by 1" | cmp -s - "$dir/kernels-all" ||
  fail "prefetch-wait own: other kernels than the whole-queue wait's"
span() { grep -c "\"what\": \"$1\"" "$dir/timeline"; }
[ "$(span ahead)" = "$ahead" ] || fail "timeline: $(span ahead) compilations ahead, the summary says $ahead"
[ "$(span compile)" = 4 ] && [ "$(span measure)" = 4 ] && [ "$(span compile_wait)" -ge 4 ] ||
  fail "timeline: expected each of the 4 groups compiled and measured once, not $(span compile) and $(span measure)"
[ "$(grep '"what": "measure_refinement"' "$dir/timeline" | grep -c 'f16 causal=0')" -ge 1 ] &&
  [ "$(span measure_refinement)" = "$(grep '"what": "measure_refinement"' "$dir/timeline" | grep -c 'f16 causal=0')" ] ||
  fail "timeline: the refinements measured should be f16 non-causal's"
awk -v wall="$wall" -F'"start": |, "end": |, "n": ' '
  NF != 4 { bad = 1 } $2 + 0 > $3 + 0 || $3 + 0 > wall { bad = 1 } END { exit bad || NR == 0 }' "$dir/timeline" ||
  fail "timeline: a line that is no span, or one out of order or past the wall time ($wall s)"
#     bench/timeline.py reads it back: as many compilations ahead, the GPU busy for part of the
#     wall time and idle for the rest.
if command -v python3 > /dev/null 2>&1; then
  python3 "$(dirname "$0")/../bench/timeline.py" "$dir/timeline" --json "$dir/timeline.json" > "$dir/timeline.txt" ||
    fail "bench/timeline.py failed: $(cat "$dir/timeline.txt")"
  python3 - "$dir/timeline.json" "$ahead" "$wall" << 'PY' || fail "bench/timeline.py: the summary disagrees with the timeline"
import json, sys
t = json.load(open(sys.argv[1]))
ok = (t["ahead"]["compilations"] == int(sys.argv[2]) and 0 < t["gpu_busy_s"] < t["wall_s"] <= float(sys.argv[3])
      and abs(t["gpu_busy_s"] + t["gpu_idle_s"] - t["wall_s"]) < 1e-6 and t["gaps"])
sys.exit(0 if ok else 1)
PY
fi
count "select key, variant from v_winners order by 1" | cmp -s - "$dir/winners-all" ||
  fail "prefetch-wait own: other winners than the whole-queue wait's"
"$ft" tune flash_fwd --db "$db" --only 'd=64,bm=64' -q --prefetch-wait some > "$dir/out" 2>&1 &&
  fail "--prefetch-wait some was accepted"
grep -q "prefetch-wait takes all or own, not 'some'" "$dir/out" || fail "--prefetch-wait: no clear message"
#     --refinements 0: f16 non-causal keeps its 16 candidates (no refinement), and every bucket
#     still races once; a count past the most is refused with the range.
rm -f "$db"
"$ft" tune flash_fwd --db "$db" --only 'd=64,bm=64' -q -j 2 --search ranked --refinements 0 \
  --cache-dir "$dir/own-cache" > "$dir/out" 2>&1 || fail "tune --refinements 0 failed"
[ "$(count "select count(*) from kernels where variant like '%causal=0,dtype=f16%'")" = 16 ] ||
  fail "--refinements 0: f16 non-causal should have measured its 16 candidates alone"
grep -q '^winners: 24 buckets (24 races of the leaders' "$dir/out" || fail "--refinements 0: expected one race per bucket"
"$ft" tune flash_fwd --db "$db" --only 'd=64,bm=64' -q --refinements 5 > "$dir/out" 2>&1 &&
  fail "--refinements 5 was accepted"
grep -q "refinements takes an integer from 0 to 4, not '5'" "$dir/out" || fail "--refinements 5: no message with the range"
unset FAKE_DTYPE_BLIND
echo "--search ranked (38 of 120 variants compiled; the bf16 winners their f16 twins' or faster; the same with --prefetch-wait own, the default): ok"

# 13. --search ranked leaves the buckets that a newer family's spec computes to it: of the sm80
#     and sm_90a forward specs on a compute capability 9.0 GPU, the sm_90a one measures the 12
#     buckets of d = 64 f16 (and its 6 grouped ones, which the sm80 spec has no workload of), the
#     sm80 one none.
rm -f "$db"
"$ft" tune flash_fwd flash_fwd_sm90 --db "$db" --only 'd=64,bm=64,bn=64,dtype=f16' -q -j 2 --search ranked \
  > "$dir/out" 2>&1 || fail "the ranked tune of both forward specs failed"
grep -q 'tuned Fake GPU: 18 buckets' "$dir/out" || fail "ranked, two specs: expected 18 buckets"
grep -q '; 12 buckets left to a newer family' "$dir/out" || fail "ranked, two specs: expected 12 buckets left to sm_90a"
[ "$(count "select count(*) from results r join kernels k on k.id = r.kernel_id where k.family = 'flash_fwd_sm80'")" = 0 ] ||
  fail "ranked, two specs: the sm80 spec measured buckets the sm_90a one has"
[ "$(count "select count(*) from v_winners")" = 18 ] || fail "ranked, two specs: expected 18 winners"
#     Only a bucket that a kept variant of the newer spec computes: the sm_90a backward has no
#     deterministic variant at d = 256, so the sm80 backward keeps those buckets.
rm -f "$db"
"$ft" tune flash_bwd flash_bwd_sm90 --db "$db" --only 'd=256,dtype=f16,causal=0,bm=64,bn=64' -q -j 2 --search ranked \
  > "$dir/out" 2>&1 || fail "the ranked tune of both backward specs failed"
grep -q 'tuned Fake GPU: 12 buckets' "$dir/out" && grep -q '; 6 buckets left to a newer family' "$dir/out" ||
  fail "ranked, two backward specs: expected 12 buckets, 6 left to sm_90a"
[ "$(count "select count(distinct r.key) from results r join kernels k on k.id = r.kernel_id
            where k.family = 'flash_bwd_sm80' and r.key like '%\"det\":1%'")" = 6 ] &&
  [ "$(count "select count(*) from results r join kernels k on k.id = r.kernel_id
              where k.family = 'flash_bwd_sm80' and r.key like '%\"det\":0%'")" = 0 ] ||
  fail "ranked, two backward specs: the sm80 spec should measure the 6 deterministic buckets only"
[ "$(count "select count(*) from v_winners")" = 12 ] || fail "ranked, two backward specs: expected 12 winners"
echo "--search ranked leaves a newer family's buckets to it (those it has a variant for): ok"


# 14. FAKE_REPLAY (what bench/search_replay.py runs the tuner on): each measurement answered with
#     the file's median for the kernel and shape, a kernel the file lacks a wrong result. Here the
#     file holds the 20 variants on the 12 buckets' shapes at 1 ms, but stages=2 qreg=1 at 0.5 ms
#     and nothing of stages=3 overlap=1.
rm -f "$db"
tune || fail "the tune for the replay's shapes failed"
count "select k.entry, r.batch, r.heads_q, r.heads_kv, r.seqlen_q, r.seqlen_k from results r join kernels k on k.id = r.kernel_id" |
  awk -F'|' '$1 !~ /stages3_.*overlap1/ { print $1, $2, $3, $4, $5, $6, ($1 ~ /stages2_.*qreg1/ ? 0.5 : 1) }' > "$dir/replay"
rm -f "$db"
FAKE_REPLAY="$dir/replay" tune || fail "the replayed tune failed"
[ "$(count "select count(*) from v_winners where variant like '%stages=2,%qreg=1%' and median_ms = 0.5")" = 12 ] ||
  fail "replay: the 0.5 ms variants should win every bucket"
grep -q "its neighbour (seqlen 2816) could not be set up (no line of this shape in the replay); the leaders' race is decided without it" "$dir/out" ||
  fail "replay: the tied 0.5 ms variants' neighbour, which the replay lacks, should be refused, and the tune go on"
[ "$(count "select count(distinct r.kernel_id) from results r join kernels k on k.id = r.kernel_id
            where k.variant like '%stages=3,%overlap=1' and r.status = 'wrong_result'")" -gt 0 ] &&
  [ "$(count "select count(*) from results r join kernels k on k.id = r.kernel_id
              where k.variant like '%stages=3,%overlap=1' and r.status != 'wrong_result'")" = 0 ] ||
  fail "replay: the kernels the file lacks should be wrong results"
echo "a replayed tune: ok"

# 16. Leaders within the noise their interleaved rounds measure race again on a neighbouring
#     shape of the bucket (11/16 of the sequence length), which decides. The replay: on every
#     bucket's shape A (stages=2 qreg=1 overlap=0) 0.500 ms, B (overlap=1) 0.502 ms, C (stages=3
#     qreg=1 overlap=1) 0.501 ms, the rest 1 ms, each measurement off by up to 1.5 %
#     (FAKE_JITTER); on the neighbour A 0.40 ms, B 0.30 ms, the rest 1 ms, and C absent (wrong
#     there). With --one-shape the bucket's own shape decides, and B wins few buckets; with them B wins where it ties (the decided winner
#     where A or C was faster on the bucket's own shape), and C is recorded wrong with the
#     neighbour's shape.
rm -f "$db"
tune || fail "the tune for the neighbour's replay failed"
count "select distinct r.batch, r.heads_q, r.heads_kv, r.seqlen_q, r.seqlen_k from results r" > "$dir/shapes"
count "select distinct k.entry from kernels k" > "$dir/entries"
awk -F'|' 'NR == FNR { e[++n] = $1; next }
  { nb = int($5 * 11 / 16 / 8) * 8
    for (i = 1; i <= n; i++) {
      a = e[i] ~ /stages2_.*qreg1_overlap0/; b = e[i] ~ /stages2_.*qreg1_overlap1/; c = e[i] ~ /stages3_.*qreg1_overlap1/
      print e[i], $1, $2, $3, $4, $5, (a ? 0.500 : b ? 0.502 : c ? 0.501 : 1)
      if (!c) print "nb", e[i], $1, $2, $3, nb, nb, (a ? 0.40 : b ? 0.30 : 1)
    } }' "$dir/entries" "$dir/shapes" > "$dir/replay.all"
b_wins="select count(*) from v_winners where variant like '%stages=2,%qreg=1,overlap=1'"
sed 's/^nb //' "$dir/replay.all" > "$dir/replay"
rm -f "$db"
FAKE_REPLAY="$dir/replay" FAKE_JITTER=0.015 tune --json --one-shape || fail "the tune without a neighbour failed"
grep -q '"ties": 0, "decided": 0,' "$dir/out" || fail "--one-shape: nothing should be decided by a neighbour"
alone=$(count "$b_wins")
rm -f "$db"
rm -f "$dir/log"
FAKE_REPLAY="$dir/replay" FAKE_JITTER=0.015 FAKE_LOG="$dir/log" tune --json || fail "the tune with a neighbour failed"
decided=$(sed -n 's/.*"decided": \([0-9]*\),.*/\1/p' "$dir/out")
with=$(count "$b_wins")
[ "$with" -ge $((alone + 3)) ] && [ "$with" -ge 9 ] ||
  fail "neighbour: B won $with buckets with the neighbour, $alone without"
[ "$(count "select count(*) from v_winners where variant not like '%stages=2,%qreg=1,overlap=%'")" = 0 ] ||
  fail "neighbour: a bucket's winner is neither A nor B"
# every race's winner is its bucket's decided one (12 rows preferred, each a winner); those the
# neighbour decided for are slower on the bucket's own shape than its fastest
[ "$decided" -gt 0 ] && [ "$(count "select count(*) from results where preferred = 1")" = 12 ] &&
  [ "$(count "select count(*) from v_winners where preferred = 1")" = 12 ] ||
  fail "neighbour: $(count "select count(*) from results where preferred = 1") rows preferred, not the 12 races' winners"
[ "$(count "select count(*) from v_winners w where w.preferred = 1 and w.median_ms > (select min(r.median_ms)
            from results r where r.key = w.key and r.status = 'ok')")" = "$decided" ] ||
  fail "neighbour: each of the $decided buckets the neighbour decided should have a winner slower on its own shape than its fastest"
# C is checked on the neighbour wherever it ties (a measure command with budget=1, verified),
# and each check is recorded wrong there; none of its races on the neighbour
checks=$(grep -c "measure .*entry=[a-z0-9_]*stages3_[a-z0-9_]*qreg1_overlap1 .* verify=1 budget=1 " "$dir/log")
[ "$checks" -ge 8 ] && [ "$(count "select count(*) from results r join kernels k on k.id = r.kernel_id where k.variant like '%stages=3,%qreg=1,overlap=1'
            and r.status = 'wrong_result' and r.seqlen_k = r.seqlen_q and r.seqlen_k % 11 = 0
            and r.reason like 'on the bucket''s second shape: %'")" = "$checks" ] ||
  fail "neighbour: C should be recorded wrong, with the neighbour's shape, wherever it was checked there ($checks)"
[ "$(grep -c '^\[[0-9]\] race .*stages3_[a-z0-9_]*qreg1_overlap1 ' "$dir/log")" = 12 ] ||
  fail "neighbour: C should race on every bucket's own shape only (12 races), not on a neighbour"
echo "leaders within the noise decided by a neighbouring shape (B won $with of 12 buckets, $alone without it; $decided decided): ok"
#     B faults on the 1024-token buckets' neighbour (704 tokens) where causal=0 and hangs there where
#     causal=1: each recorded so for its bucket, the worker replaced, the race and the tune go on.
#     (A, B and C alike on the buckets' own shapes, without jitter: they tie in every bucket.)
rm -f "$db"
sed 's/^nb //; s/ 0\.50[12]$/ 0.5/' "$dir/replay.all" > "$dir/replay"
FAKE_REPLAY="$dir/replay" FAKE_ONLY_SK=704 FAKE_FAULT=stages2_causal0_dtypef16_qreg1_overlap1 \
FAKE_HANG=stages2_causal1_dtypef16_qreg1_overlap1 tune --timeout 2 || fail "the tune with failures on the neighbour failed"
grep -q 'worker restarts: 2;' "$dir/out" || fail "neighbour failures: expected 2 worker restarts"
second="r.reason like 'on the bucket''s second shape: %' and r.seqlen_k = 704"
[ "$(count "select count(*) from results r where $second and r.status = 'fault' and r.key like '%\"causal\":0%'")" = 1 ] &&
  [ "$(count "select count(*) from results r where $second and r.status = 'timeout' and r.key like '%\"causal\":1%'")" = 1 ] ||
  fail "neighbour failures: expected B's fault and timeout recorded with the neighbour's shape"
[ "$(count "select count(*) from v_winners")" = 12 ] &&
  [ "$(count "select count(*) from v_winners where seqlen_k = 1024 and variant like '%stages=2,%qreg=1,overlap=1'")" = 0 ] ||
  fail "neighbour failures: B should not win the 1024-token buckets, and every bucket should have a winner"
echo "a leader that faults or hangs on the neighbour: recorded so, the tune goes on: ok"

# 17. The race takes the bucket's built-in default (d = 64: bm=128 bn=128 stages=1) beside the
#     leaders, however far behind its first measurement, and the runner-up: here the fastest
#     (bm=64 stages=2) 1.00 ms, bm=64 stages=3 1.01, the default 1.05 (beyond the 4 % margin the
#     stand-in's quartiles give), the rest 1.2. Each races three rounds in every bucket, in one
#     race command (the kernels timed against each other); the fastest still wins.
dflt=bm128_bn128_warps4_stages1
rm -f "$db"
"$ft" tune --search exhaustive flash_fwd --db "$db" --only 'd=64,bn=128,warps=4,dtype=f16,qreg=0,overlap=0' -q -j 2 > "$dir/out" 2>&1 ||
  fail "the tune for the default's replay failed"
count "select k.entry, r.batch, r.heads_q, r.heads_kv, r.seqlen_q, r.seqlen_k from results r join kernels k on k.id = r.kernel_id" |
  awk -F'|' '{ ms = $1 ~ /bm64_bn128_warps4_stages2/ ? 1.00 : $1 ~ /bm64_bn128_warps4_stages3/ ? 1.01 : 1.2
               if ($1 ~ /'$dflt'/) ms = 1.05
               print $1, $2, $3, $4, $5, $6, ms }' > "$dir/replay"
[ "$(wc -l < "$dir/replay")" = 72 ] || fail "the default's replay should have 72 lines"
rm -f "$db" "$dir/log"
FAKE_REPLAY="$dir/replay" FAKE_LOG="$dir/log" "$ft" tune --search exhaustive flash_fwd --db "$db" --only 'd=64,bn=128,warps=4,dtype=f16,qreg=0,overlap=0' \
  -q -j 2 --json > "$dir/out" 2>&1 || fail "the replayed tune with the default failed"
#     The summary sets the default's raced median beside the winner's: 1.05 / 1.00 in each race.
grep -q '"over_default": {"races": 12, "geomean": 1.0500, "min": 1.0500, "max": 1.0500}}$' "$dir/out" ||
  fail "the summary should give the default's median over the winner's as 1.05 in 12 races: $(grep -o '"over_default.*' "$dir/out")"
[ "$(grep -c "race .* rounds=3 .*entry=[a-z0-9_]*$dflt" "$dir/log")" = 12 ] ||
  fail "the default should race 3 rounds in each of the 12 buckets, not in $(grep -c "race .*entry=[a-z0-9_]*$dflt" "$dir/log")"
[ "$(grep -c "race .* rounds=3 .*entry=[a-z0-9_]*bm64_bn128_warps4_stages3" "$dir/log")" = 12 ] ||
  fail "the runner-up should race 3 rounds in each of the 12 buckets, not in $(grep -c "race .*entry=[a-z0-9_]*bm64_bn128_warps4_stages3" "$dir/log")"
grep -q "measure .* verify=0 budget=11 " "$dir/log" && fail "a race round went as a measure command"
[ "$(count "select count(*) from v_winners where variant like 'd=64,bm=64,bn=128,warps=4,stages=2,%'")" = 12 ] ||
  fail "the fastest should win every bucket"
#     The race times at a sustained clock, slower than single measurements after a gap (here
#     by 30 %: the raced figures 1.30, 1.31, 1.37 against the others' 1.2): the race's winner
#     still wins, decided, and no variant measured once, however fast it read.
rm -f "$db"
FAKE_REPLAY="$dir/replay" FAKE_RACE_SLOWER=0.3 "$ft" tune --search exhaustive flash_fwd --db "$db" \
  --only 'd=64,bn=128,warps=4,dtype=f16,qreg=0,overlap=0' -q -j 2 > "$dir/out" 2>&1 ||
  fail "the replayed tune with slower races failed"
[ "$(count "select count(*) from v_winners where variant like 'd=64,bm=64,bn=128,warps=4,stages=2,%' and preferred = 1
            and median_ms > 1.29")" = 12 ] ||
  fail "a variant measured once beat the race's winner: $(count "select variant, median_ms from v_winners" | head -3)"
echo "the race takes the runner-up and the built-in default, and its winner is decided: ok"

# 15. --search ranked, three head dims (64 and 128, then 32 with two workloads; warps = 4, where
#     d = 64's first group is refined twice): the second one's first group (which no measurement
#     informs) compiles while the first head dim's first group is measured and is measured while
#     that group's first refinement compiles; the third one's first group compiles while that
#     refinement is measured, and is measured while the second refinement compiles: both ahead
#     of the first head dim's other groups. What the search chooses does not change: the same
#     results as each head dim tuned alone (the spec copied with those head dims and their
#     workloads only).
src=$(cd "$(dirname "$0")/.." && pwd)
cp -R "$src/specs" "$dir/specs"
sed -i 's/values = { 32, 64, 80, 96, 128, 160, 192, 256 }, open = true/values = { 32, 64, 128 }, open = true/;
        s/paper_grid({ 64, 128, 256 }, { 32, 96, 192 })/paper_grid({ 64, 128 }, { 32 })/' "$dir/specs/flash_fwd.lua"
grep -q 'paper_grid({ 64, 128 }, { 32 })' "$dir/specs/flash_fwd.lua" || fail "three head dims: the spec copy was not edited"
rm -f "$db"
"$ft" tune "$dir/specs/flash_fwd.lua" --db "$db" --only 'warps=4' -q -j 2 --search ranked > "$dir/out" 2>&1 ||
  fail "the ranked tune of three head dims failed"
grep -q 'tuned Fake GPU: 56 buckets' "$dir/out" || fail "three head dims: expected 56 buckets"
results="select r.key, k.variant, r.median_ms from results r join kernels k on k.id = r.kernel_id order by 1, 2"
count "$results" > "$dir/joint"
first_of() { count "select min(id) from results where key like '%\"d\":$1,%' and key like '%\"$2\"%' and key like '%\"causal\":$3%'"; }
for d in 128 32; do
  [ "$(first_of "$d" f16 0)" -lt "$(first_of 64 f16 1)" ] ||
    fail "three head dims: d = $d's first group was not measured ahead of d = 64's causal group"
done
: > "$dir/alone"
for d in 32 64 128; do
  rm -f "$db"
  "$ft" tune "$dir/specs/flash_fwd.lua" --db "$db" --only "warps=4,d=$d" -q -j 2 --search ranked > "$dir/out" 2>&1 ||
    fail "the ranked tune of d = $d alone failed"
  count "$results" >> "$dir/alone"
done
sort "$dir/joint" > "$dir/joint.sorted"
sort "$dir/alone" > "$dir/alone.sorted"
[ -s "$dir/joint.sorted" ] && cmp -s "$dir/joint.sorted" "$dir/alone.sorted" ||
  fail "three head dims: the joint tune measured other kernels, or got other medians, than each head dim alone"
echo "--search ranked measures the next head dims' first groups while refinements compile, choosing the same: ok"
