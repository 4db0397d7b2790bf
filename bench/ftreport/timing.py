"""Timing on the GPU through PyTorch (handed in, never imported here): interleaved rounds of
CUDA-event timing with an L2 flush before each repetition, the GPU memory one call takes, and the
first line of an error for the report."""
from .stats import summarize


class Timer:
    """Interleaved CUDA-event timing with an L2 flush before each repetition."""

    def __init__(self, torch, args):
        self.torch = torch
        self.flush = torch.empty(args.flush_mib << 20, dtype=torch.int8, device="cuda")
        self.args = args

    def estimate(self, fn):
        torch = self.torch
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        torch.cuda.synchronize()
        s.record()
        for _ in range(3):
            fn()
        e.record()
        torch.cuda.synchronize()
        est = max(s.elapsed_time(e) / 3, 1e-3)
        for _ in range(min(200, int(self.args.warmup_ms / est))):
            fn()
        torch.cuda.synchronize()
        return est

    def run(self, fns):
        """fns: {name: callable}. Returns {name: stats or {'error': ...}}."""
        torch, a = self.torch, self.args
        out, per_round, times, medians = {}, {}, {}, {}
        for name, fn in list(fns.items()):
            try:
                est = self.estimate(fn)
            except Exception as e:  # noqa: BLE001 - a failing system must not end the run
                out[name] = {"error": "timing: %s" % first_line(e)}
                del fns[name]
                continue
            per_round[name] = max(a.min_reps, min(a.max_reps, int(a.rep_ms / a.rounds / est)))
            times[name], medians[name] = [], []
        names = list(fns)
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)] if names else []
            for name in order:
                if name in out:
                    continue
                fn, n = fns[name], per_round[name]
                try:
                    fn()  # untimed, after the previous system
                    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
                    for s, e in ev:
                        self.flush.zero_()
                        s.record()
                        fn()
                        e.record()
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001
                    out[name] = {"error": "timing: %s" % first_line(e)}
                    continue
                ts = [s.elapsed_time(e) for s, e in ev]
                times[name] += ts
                medians[name].append(summarize(ts)["ms"])
        for name in names:
            if name not in out:
                out[name] = summarize(times[name])
                out[name]["round_medians_ms"] = medians[name]
        return out


def first_line(e):
    text = str(e).strip()
    return (text.splitlines() or [type(e).__name__])[0][:400]


def mem_peak(torch, fn):
    """Bytes allocated at the peak of one call beyond what was allocated before it, and bytes the
    call leaves allocated (its output) once it is dropped... measured before the drop."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    r = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    kept = torch.cuda.memory_allocated() - base
    del r
    return peak, kept
