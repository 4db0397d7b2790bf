"""A run on one GPU: the systems (flashtune's contexts, PyTorch SDPA's backends forced one by
one, FlexAttention), the grid of shapes, and per shape the same inputs for every system, its
first call, its output checked against the fp64 reference, its memory, then interleaved timing.
PyTorch is imported when a run starts, not with this module."""
import contextlib
import math
import os
import signal
import sys
import tempfile
import time
import warnings

from flashtune import flops  # the binding loads its library only when a context is made

from .backward import read_backward
from .dbsummary import tuning_cost
from .environment import environment
from .output import write_outputs
from .parse import bucket_key, parse_dispatch, read_overhead
from .reference import check, reference
from .render import cell, label, tflops_of
from .systems import LABELS, TOLERANCE
from .timing import Timer, first_line, mem_peak


class Stop(BaseException):
    """SIGTERM (timeout) or SIGINT: write what was measured and leave."""


def _on_signal(signum, frame):
    raise Stop("signal %d" % signum)


@contextlib.contextmanager
def capture_stderr_fd():
    """Captures what C code writes to file descriptor 2 (flashtune's FLASHTUNE_DEBUG lines), and
    echoes it afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    tmp = tempfile.TemporaryFile()
    os.dup2(tmp.fileno(), 2)
    box = {"text": ""}
    try:
        yield box
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        tmp.seek(0)
        box["text"] = tmp.read().decode(errors="replace")
        tmp.close()
        if box["text"]:
            sys.stderr.write(box["text"])
            sys.stderr.flush()


def run(args):
    try:
        import torch
    except ImportError:
        sys.exit("report.py: PyTorch is not installed here (--selftest and --from-json need none)")
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flashtune

    if not torch.cuda.is_available():
        sys.exit("report.py: no GPU visible to PyTorch")
    torch.cuda.set_device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    os.environ["FLASHTUNE_DEBUG"] = "1"  # read by the library at each kernel choice

    dtypes_t = {"f16": torch.float16, "bf16": torch.bfloat16}
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.flex and "flex" not in systems:
        systems.append("flex")
    forced = {"forced%d" % (i + 1): v for i, v in enumerate(args.variant or [])}
    systems = systems[:1] + list(forced) + systems[1:] if systems[:1] == ["flashtune"] else list(forced) + systems
    bad = [s for s in systems if s not in LABELS and s not in forced]
    if bad:
        sys.exit("report.py: unknown system(s) %s (known: %s)" % (", ".join(bad), ", ".join(LABELS)))

    t_start = time.time()
    env = environment(torch, args)
    print("# %s, driver %s, torch %s (CUDA %s, cuDNN %s), triton %s, %s" % (
        env["gpu"]["name"], env.get("driver"), env["torch"], env["torch_cuda"], env["cudnn"], env["triton"],
        env["date"]), flush=True)

    if args.no_db:
        db_arg = ""
    else:
        db_arg = args.db  # None: $FLASHTUNE_DB, else the default path, when it exists
    if db_arg == "":
        db_used = None
    elif db_arg:
        db_used = db_arg
    else:
        default = os.environ.get("FLASHTUNE_DB") or os.path.join(
            os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "flashtune", "tuning.db")
        db_used = default if os.path.exists(default) else None
    config = {k: getattr(args, k) for k in ("tokens", "hidden", "group", "layout", "seed", "flush_mib", "rounds",
                                            "rep_ms", "min_reps", "max_reps", "warmup_ms", "check_rows", "tol_scale",
                                            "flex_mode", "flex_budget", "budget", "spec")}
    config.update(systems=systems, forced=forced, database_arg=db_arg, database_used=db_used,
                  tolerance={k: {m: t * args.tol_scale for m, t in v.items()} for k, v in TOLERANCE.items()},
                  command=" ".join(sys.argv))
    report = {"env": env, "config": config, "rows": [], "dispatch": {}, "skipped_shapes": []}
    if args.tune_log or args.db:
        report["tuning_cost"] = tuning_cost(args.tune_log, args.db, args.flashtune)
    if args.overhead_json:
        report["overhead_path"] = args.overhead_json
        try:
            report["overhead"] = read_overhead(args.overhead_json)
        except (OSError, ValueError) as e:
            report["overhead"] = {"error": "cannot read %s: %s" % (args.overhead_json, e)}
    if args.bwd_json:
        report["backward"] = read_backward(args.bwd_json)  # checked before any GPU time is spent

    contexts = {}
    try:
        if "flashtune" in systems:
            contexts["flashtune"] = flashtune.Context(device=args.device, database=db_arg, spec=args.spec)
        for name, v in forced.items():
            contexts[name] = flashtune.Context(device=args.device, variant=v, database="", spec=args.spec)
    except flashtune.FlashtuneError as e:
        sys.exit("report.py: flashtune.Context: %s" % e)

    fa4_fn = None
    if "fa4" in systems:
        try:
            from flash_attn.cute import flash_attn_func as fa4_fn
        except Exception as e:  # noqa: BLE001 - not installed here: the column is left out
            report["fa4_error"] = first_line(e)
            print("fa4: %s" % report["fa4_error"], flush=True)
            systems.remove("fa4")

    flex_fn, flex_state, block_masks = None, {"spent": 0.0}, {}
    if "flex" in systems:
        try:
            import torch._dynamo
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: F401
            cfg = torch._dynamo.config
            for key, val in (("cache_size_limit", 4096), ("recompile_limit", 4096),
                             ("accumulated_cache_size_limit", 65536), ("accumulated_recompile_limit", 65536)):
                if hasattr(cfg, key):
                    setattr(cfg, key, val)
            flex_fn = torch.compile(flex_attention, dynamic=False, mode=args.flex_mode)
        except Exception as e:  # noqa: BLE001
            report["flex_error"] = first_line(e)
            print("flex: %s" % report["flex_error"], flush=True)
            systems.remove("flex")

    timer = Timer(torch, args)
    shapes, left_out = grid(args)
    for dt, d, s in left_out:
        print("skipping %s d=%d s=%d: hidden %% d, tokens < seqlen or heads %% group" % (dt, d, s), flush=True)

    def sdpa_call(backend, q, k, v, causal):
        gqa = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}

        def fn():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), **gqa)
        return fn

    backends = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        for idx, (dt, d, causal, s) in enumerate(shapes):
            if args.budget and time.time() - t_start > args.budget:
                report["skipped_shapes"] += ["%s d=%d causal=%d s=%d" % x for x in shapes[idx:]]
                print("time budget of %d s spent: %d shapes left out" % (args.budget, len(shapes) - idx), flush=True)
                break
            row = measure_shape(torch, flashtune, args, report, timer, contexts, systems, backends, sdpa_call,
                                dtypes_t[dt], dt, d, causal, s, flex_fn, block_masks, flex_state, fa4_fn)
            report["rows"].append(row)
            write_outputs(report, args.out)
    except Stop as e:
        report["stopped"] = str(e)
        print("stopped (%s): writing what was measured" % e, flush=True)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        report["wall_s"] = time.time() - t_start
        write_outputs(report, args.out, plots=not args.no_plots)
        for c in contexts.values():
            c.close()
    print("wrote %s" % ", ".join(os.path.join(args.out, f) for f in sorted(os.listdir(args.out))), flush=True)
    return report


def grid(args):
    """The shapes to measure, (dtype, d, causal, seqlen) in order, and those left out, (dtype, d,
    seqlen) once per causality: a head dim that does not divide --hidden, a seqlen above --tokens
    (no whole batch), or heads (hidden / d) that --group does not divide."""
    shapes, left_out = [], []
    for dt in args.dtypes.split(","):
        for d in [int(x) for x in args.head_dims.split(",")]:
            for c in [int(x) for x in args.causal.split(",")]:
                for s in [int(x) for x in args.seqlens.split(",")]:
                    if args.hidden % d or args.tokens < s or (args.hidden // d) % args.group:
                        left_out.append((dt, d, s))
                    else:
                        shapes.append((dt, d, c, s))
    return shapes, left_out


def measure_shape(torch, flashtune, args, report, timer, contexts, systems, backends, sdpa_call, tdtype, dt, d,
                  causal, s, flex_fn, block_masks, flex_state, fa4_fn=None):
    b, h = args.tokens // s, args.hidden // d
    hkv = h // args.group
    fl = flops(b, h, s, s, d, causal)
    elt = torch.tensor([], dtype=tdtype).element_size()
    row = {"dtype": dt, "d": d, "causal": causal, "seqlen": s, "batch": b, "heads": h, "heads_kv": hkv, "flops": fl,
           "naive_scores_bytes": b * h * s * s * 4, "systems": {}}
    tol = report["config"]["tolerance"][dt]
    torch.manual_seed(args.seed + 1000003 * s + 1009 * d + 7 * causal + (dt == "bf16"))
    if args.layout == "bhsd":
        q, k, v = (torch.randn(b, n, s, d, dtype=tdtype, device="cuda") for n in (h, hkv, hkv))
        qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))  # [b, s, h, d] views for flashtune
    else:
        qs, ks, vs = (torch.randn(b, s, n, d, dtype=tdtype, device="cuda") for n in (h, hkv, hkv))
        q, k, v = (t.transpose(1, 2) for t in (qs, ks, vs))
    scale = 1.0 / math.sqrt(d)
    rows_idx, ref = reference(torch, q, k, v, causal, args.check_rows, scale)
    o_bytes, lse_bytes = b * s * h * d * elt, b * h * s * 4

    fns, outs = {}, {}

    def keep(name, fn, o, first_s):
        """A system other than flashtune's contexts: its first call's time and output O
        ([b, h, s, d]) checked, its extra memory, and fn kept for the timing."""
        rec = row["systems"][name]
        rec["first_call_s"] = first_s
        rec["check"] = check(torch, o, None, rows_idx, ref, tol)
        outs[name] = o
        rec["mem"] = {"peak_extra_bytes": mem_peak(torch, fn)[0]}
        fns[name] = fn

    for name in systems:
        rec = row["systems"].setdefault(name, {})
        try:
            if name in contexts:
                ctx = contexts[name]
                pre = torch.empty(b, s, h, d, dtype=tdtype, device="cuda")
                torch.cuda.synchronize()
                free0 = torch.cuda.mem_get_info()[0]
                t0 = time.perf_counter()
                with capture_stderr_fd() as cap:
                    ctx.forward(qs, ks, vs, causal=causal, out=pre)
                    torch.cuda.synchronize()
                rec["first_call_s"] = time.perf_counter() - t0
                free1 = torch.cuda.mem_get_info()[0]
                ctx.forward(qs, ks, vs, causal=causal, out=pre)
                torch.cuda.synchronize()
                free2 = torch.cuda.mem_get_info()[0]
                seen = report["dispatch"].setdefault(name, {})  # every choice this context made
                seen.update(parse_dispatch(cap["text"]))
                key = bucket_key(dt, d, causal, b, h, s, s, hkv)
                rec["bucket"] = key
                if key in seen:
                    rec["dispatch"] = seen[key]
                o, lse = ctx.forward(qs, ks, vs, causal=causal, return_lse=True)
                torch.cuda.synchronize()
                rec["check"] = check(torch, o.transpose(1, 2), lse, rows_idx, ref, tol)
                outs[name] = o.transpose(1, 2)
                del o, lse, pre
                peak, kept = mem_peak(torch, lambda: ctx.forward(qs, ks, vs, causal=causal))
                peak_lse, _ = mem_peak(torch, lambda: ctx.forward(qs, ks, vs, causal=causal, return_lse=True))
                rec["mem"] = {"o_bytes": o_bytes, "lse_bytes": lse_bytes, "peak_extra_bytes": peak,
                              "retained_bytes": kept, "peak_extra_bytes_lse": peak_lse,
                              "driver_first_call_bytes": free0 - free1, "driver_later_call_bytes": free1 - free2,
                              "only_o_lse": peak <= o_bytes and peak_lse <= o_bytes + lse_bytes and free1 == free2}
                fns[name] = (lambda c=ctx: c.forward(qs, ks, vs, causal=causal))
            elif name in backends:
                fn = sdpa_call(backends[name], q, k, v, causal)
                with warnings.catch_warnings(record=True) as warned:
                    warnings.simplefilter("always")
                    t0 = time.perf_counter()
                    try:
                        o = fn()
                        torch.cuda.synchronize()
                    except RuntimeError as e:
                        why = "; ".join(sorted({str(w.message).splitlines()[0][:200] for w in warned}))
                        raise RuntimeError("%s%s" % (first_line(e), (" (" + why + ")") if why else ""))
                keep(name, fn, o, time.perf_counter() - t0)
            elif name == "fa4":
                # FA4 reads [b, s, h, d] with the head dim contiguous; its copies are made once per
                # shape, outside the timing. It returns (O, LSE); O is compared like SDPA's.
                qf, kf, vf = (t.contiguous() for t in (qs, ks, vs))

                def fn(qf=qf, kf=kf, vf=vf):
                    o = fa4_fn(qf, kf, vf, causal=bool(causal))
                    return o[0] if isinstance(o, tuple) else o
                t0 = time.perf_counter()
                o = fn()
                torch.cuda.synchronize()
                keep(name, fn, o.transpose(1, 2), time.perf_counter() - t0)
            elif name == "flex":
                if args.flex_budget and flex_state["spent"] > args.flex_budget:
                    rec.update(skipped=True, error="flex time budget (%d s) spent" % args.flex_budget)
                    continue
                if causal not in block_masks.setdefault(s, {}):
                    from torch.nn.attention.flex_attention import create_block_mask

                    def causal_mask(bb, hh, qi, ki):
                        return qi >= ki
                    block_masks[s][causal] = (create_block_mask(causal_mask, None, None, s, s, device="cuda")
                                              if causal else None)
                bm = block_masks[s][causal]
                fn = (lambda bm=bm: flex_fn(q, k, v, block_mask=bm, enable_gqa=hkv != h))
                t0 = time.perf_counter()
                try:
                    o = fn()
                    torch.cuda.synchronize()
                finally:
                    flex_state["spent"] += time.perf_counter() - t0
                keep(name, fn, o, time.perf_counter() - t0)
        except Stop:
            raise
        except Exception as e:  # noqa: BLE001 - one system failing must not end the run
            rec["error"] = first_line(e)
            fns.pop(name, None)
            continue
        if not rec["check"]["ok"]:
            rec["wrong"] = True
            if not args.time_wrong:
                fns.pop(name, None)
    if "fa2" in outs:
        ref_full = outs["fa2"].float()
        for name, o in outs.items():
            if name != "fa2":
                row["systems"][name]["check"]["max_abs_vs_fa2"] = float((o.float() - ref_full).abs().max())
        del ref_full
    outs.clear()

    for name, st in timer.run(fns).items():
        rec = row["systems"][name]
        rec.update(st)
        if st.get("ms"):
            rec["tflops"] = fl / st["ms"] / 1e9
    ft = tflops_of(row, "flashtune")
    row["ratios"] = {a: ft / tflops_of(row, a) for a in row["systems"]
                     if a != "flashtune" and ft is not None and tflops_of(row, a) is not None}
    print("%-4s d=%-3d causal=%d s=%-5d b*h=%-4d %s" % (dt, d, causal, s, b * h, "  ".join(
        "%s %s" % (label(report, n), cell(row, n)) for n in systems if n in row["systems"])) +
          ("  " + " ".join("ft/%s %.2f" % (label(report, a), x) for a, x in row["ratios"].items())
           if row["ratios"] else ""), flush=True)
    return row


def selftest(expect, tmp):
    import argparse

    def grid_of(**kw):
        a = dict(dtypes="bf16", head_dims="64,128,256", causal="0,1", seqlens="1024,32768", tokens=16384,
                 hidden=2048, group=1)
        a.update(kw)
        return grid(argparse.Namespace(**a))
    shapes, left = grid_of()
    expect(len(shapes) == 6 and {s for _, _, _, s in shapes} == {1024} and len(left) == 6,
           "grid: a seqlen above the tokens left out, every head dim kept")
    shapes, left = grid_of(group=8)  # 32, 16 and 8 heads
    expect([d for _, d, c, _ in shapes if c == 0] == [64, 128, 256], "grid: group 8 divides 32, 16 and 8 heads")
    shapes, left = grid_of(group=16, seqlens="1024")  # 8 heads at d = 256
    expect([d for _, d, c, _ in shapes if c == 0] == [64, 128] and left == [("bf16", 256, 1024)] * 2,
           "grid: group 16 leaves out d = 256 (8 heads)")
    shapes, _ = grid_of(hidden=2880, head_dims="72,128", seqlens="1024")
    expect([d for _, d, _, _ in shapes] == [72, 72], "grid: a head dim that does not divide hidden left out")
    expect(flops(4, 16, 4096, 4096, 128, 0) == 4.0 * 4 * 16 * 4096 * 4096 * 128, "flops, non-causal")
    expect(flops(4, 16, 4096, 4096, 128, 1) == 2.0 * 4 * 16 * 4096 * 4096 * 128, "flops, causal halves")
    expect(abs(flops(1, 16, 16384, 16384, 128, 0) / 7.0 / 1e9 - 314.1) < 0.1, "TFLOP/s of a 7 ms s=16k d=128 call")
