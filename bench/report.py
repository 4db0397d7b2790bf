#!/usr/bin/env python3
"""One run, one GPU, the same input tensors: flashtune's tuned dispatch against what users would
pick instead, with every number kept.

Systems (each a column of the report):
  flashtune   flashtune.Context(database=...): the tuned winner of each bucket, the way an
              application calls it (the output allocated by the call)
  forcedN     flashtune.Context(variant=V) for each --variant V (optional)
  fa2         PyTorch scaled_dot_product_attention, SDPBackend.FLASH_ATTENTION forced
  cudnn       ... SDPBackend.CUDNN_ATTENTION forced
  efficient   ... SDPBackend.EFFICIENT_ATTENTION forced (memory-efficient)
  fa4         FlashAttention-4 (flash_attn.cute.flash_attn_func) where it imports, else left out
  flex        torch.compile(flex_attention, mode=--flex-mode), causal through a block mask
              (optional, --flex: its first call per shape compiles and autotunes, 3.5-21 s on an H200)

Grid (the FlashAttention-2/3 papers'): --tokens per batch (batch = tokens / seqlen), --hidden (heads =
hidden / head_dim), every seqlen x head dim x causal x dtype asked for. FLOPs = 4*b*h*s*s*d,
halved when causal. --group G gives K and V h / G heads (grouped-query prefill; SDPA is called
with enable_gqa, the other systems take the fewer heads as they are), FLOPs unchanged.

Method, per shape: random normal Q, K, V made once; each system is called once (its first
call, timed on the host: kernel selection, compilation, autotuning), its output checked
against an fp64 reference on sampled rows (and flashtune's log-sum-exp too); a system whose
output is wrong is flagged and not timed (unless --time-wrong). Then every system is timed in
--rounds interleaved rounds (the order rotating each round): CUDA events around each call, a
--flush-mib buffer zeroed before each repetition so that L2 holds nothing, an untimed call
before each block. Reported: the median over all repetitions and the quartiles. The extra GPU
memory of one call (torch.cuda.max_memory_allocated) is measured for every system, and for
flashtune also the memory the library itself takes from the driver.

Outputs in --out: report.json (everything, the environment included), report.md, and
tflops_<dtype>.png (TFLOP/s against seqlen, one panel per head dim and causality). The JSON
and the markdown are rewritten after every shape, so a run that is stopped keeps what it
measured. With --tune-log / --db the cost of a tune is reported; with --overhead-json the
fields of that file are included verbatim; with --bwd-json (bench/bwd_compare.py's JSON, one file
per run) the backward's and forward+backward's tables against the same anchors.

Needs PyTorch with CUDA (and Triton for --flex); matplotlib for the plots. Without a GPU:
--selftest checks the parts that need none, --from-json re-renders an existing report.json.

Examples:
  python3 bench/report.py --out /tmp/report --db tuning.db --tune-log tune.txt
  python3 bench/report.py --out /tmp/report --seqlens 4096 --head-dims 128 --dtypes f16 --flex
  python3 bench/report.py --from-json /tmp/report/report.json --out /tmp/report2
  python3 bench/report.py --selftest
"""

# What it does lives in the package ftreport beside this file (ftreport/__init__.py lists its
# modules); this file is the command line.
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ftreport import REPO  # noqa: E402 - the package is found next to this file
from ftreport.dbsummary import tuning_cost  # noqa: E402
from ftreport.measure import run  # noqa: E402
from ftreport.output import merge_reports, write_outputs  # noqa: E402
from ftreport.parse import read_overhead  # noqa: E402
from ftreport.backward import read_backward  # noqa: E402
from ftreport.selftest import run_all as selftest  # noqa: E402
from ftreport.systems import DEFAULT_SYSTEMS, TOLERANCE  # noqa: E402


# ---- command line ------------------------------------------------------------------------------

def backward_of(paths):
    """The backward's section from bench/bwd_compare.py's files, or exit naming what is wrong."""
    try:
        return read_backward(paths)
    except ValueError as e:
        sys.exit("report.py: --bwd-json %s" % e)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_argument_group("what to measure")
    g.add_argument("--out", help="output directory (report.json, report.md, tflops_<dtype>.png)")
    g.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    g.add_argument("--head-dims", default="64,128,256")
    g.add_argument("--causal", default="0,1", help="0, 1 or 0,1")
    g.add_argument("--dtypes", default="f16,bf16", help="f16, bf16 or both")
    g.add_argument("--tokens", type=int, default=16384, help="tokens per batch: batch = tokens / seqlen")
    g.add_argument("--hidden", type=int, default=2048, help="heads = hidden / head_dim")
    g.add_argument("--group", type=int, default=1, help="query heads per K/V head (grouped-query attention): K and V "
                   "have heads / group heads; shapes whose heads it does not divide are left out")
    g.add_argument("--layout", choices=("bhsd", "bshd"), default="bhsd",
                   help="storage of Q, K, V (and what SDPA gets); the other systems read it through strides")
    g.add_argument("--systems", default=DEFAULT_SYSTEMS, help="from flashtune, fa2, cudnn, efficient, fa4, flex")
    g.add_argument("--variant", action="append", metavar="V",
                   help="also time a flashtune context forced to this variant (d, causal, dtype may be left out; "
                        "repeatable)")
    g.add_argument("--flex", action="store_true", help="also time FlexAttention (compiles per shape: slow)")
    g.add_argument("--flex-mode", default="max-autotune-no-cudagraphs", help="torch.compile mode for flex_attention")
    g.add_argument("--flex-budget", type=float, default=300, help="seconds of flex first calls before flex is "
                   "skipped for the remaining shapes (0: no limit)")
    g.add_argument("--spec", help="spec file for the flashtune contexts (default: the built-in forward spec)")
    g.add_argument("--device", type=int, default=0)
    g.add_argument("--seed", type=int, default=0)
    g = ap.add_argument_group("flashtune and the tuning cost")
    g.add_argument("--db", help="tuning database: the flashtune context dispatches to its winners, and the tuning "
                   "cost it records is reported (default for the context: $FLASHTUNE_DB, else "
                   "~/.local/share/flashtune/tuning.db when it exists, else the built-in defaults)")
    g.add_argument("--no-db", action="store_true", help="the context uses the built-in defaults (--db still "
                   "reported)")
    g.add_argument("--tune-log", help="what `flashtune tune` printed (its time split)")
    g.add_argument("--flashtune", default=None, help="the flashtune command, to read --db through `flashtune query` "
                   "when Python's SQLite cannot (default: build-dev/flashtune or build/flashtune)")
    g.add_argument("--overhead-json", help="JSON from bench/overhead.c, included verbatim")
    g.add_argument("--bwd-json", metavar="FILE", action="append",
                   help="JSON from bench/bwd_compare.py (one per run, e.g. per dtype): the backward's and "
                        "forward+backward's tables")
    g = ap.add_argument_group("timing and checking")
    g.add_argument("--rounds", type=int, default=5, help="interleaved rounds per shape")
    g.add_argument("--rep-ms", type=float, default=300, help="timed milliseconds per system and shape, all rounds")
    g.add_argument("--min-reps", type=int, default=3, help="repetitions per round, at least")
    g.add_argument("--max-reps", type=int, default=100, help="repetitions per round, at most")
    g.add_argument("--warmup-ms", type=float, default=25)
    g.add_argument("--flush-mib", type=int, default=256, help="buffer zeroed before each repetition")
    g.add_argument("--check-rows", type=int, default=128, help="rows per sampled (batch, head) checked in fp64")
    g.add_argument("--tol-scale", type=float, default=1.0, help="multiplies the error tolerances")
    g.add_argument("--time-wrong", action="store_true", help="time systems whose output failed the check too")
    g.add_argument("--budget", type=float, default=0, help="stop starting new shapes after this many seconds (0: none)")
    g = ap.add_argument_group("other modes")
    g.add_argument("--no-plots", action="store_true")
    g.add_argument("--from-json", metavar="REPORT", action="append",
                   help="re-render report.md and the plots of a report.json (with --tune-log/--db/--overhead-json: "
                   "add those) into --out; no GPU. Repeated: one report from the parts of a run split over the "
                   "GPUs of one host (the same systems, each shape once)")
    g.add_argument("--selftest", action="store_true", help="check the parts that need no GPU and no torch")
    args = ap.parse_args(argv)

    if args.flashtune is None:
        for cand in ("build-dev/flashtune", "build/flashtune"):
            if os.path.exists(os.path.join(REPO, cand)):
                args.flashtune = os.path.join(REPO, cand)
                break
    if args.selftest:
        return selftest()
    if not args.out:
        ap.error("--out is required")
    if args.from_json:
        parts = []
        for path in args.from_json:
            with open(path) as f:
                parts.append(json.load(f))
        try:
            report = merge_reports(parts)
        except ValueError as e:
            sys.exit("report.py: cannot merge %s: %s" % (", ".join(args.from_json), e))
        if args.tune_log or args.db:
            old = report.get("tuning_cost") or {}
            report["tuning_cost"] = tuning_cost(args.tune_log, args.db, args.flashtune)
            if not args.db and "db" in old:  # keep what the run read from its database
                report["tuning_cost"]["db"] = old["db"]
        if args.overhead_json:
            report["overhead"] = read_overhead(args.overhead_json)
            report["overhead_path"] = args.overhead_json
        if args.bwd_json:
            report["backward"] = backward_of(args.bwd_json)
        report.pop("plots", None)
        write_outputs(report, args.out, plots=not args.no_plots)
        print("wrote %s" % ", ".join(os.path.join(args.out, f) for f in sorted(os.listdir(args.out))))
        return 0
    if args.group < 1:
        ap.error("--group takes a positive count of query heads per K/V head")
    for dt in args.dtypes.split(","):
        if dt not in TOLERANCE:
            ap.error("--dtypes takes f16 and/or bf16, not %r" % dt)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
