"""Order statistics and means of timings: quantiles, the median and quartiles of a sample, the
geometric mean of ratios and throughputs."""
import math


def geomean(values):
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def quantile(sorted_vals, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_vals:
        return None
    pos = p * (len(sorted_vals) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def summarize(times_ms):
    s = sorted(times_ms)
    return {"ms": quantile(s, 0.5), "q1_ms": quantile(s, 0.25), "q3_ms": quantile(s, 0.75),
            "min_ms": s[0] if s else None, "max_ms": s[-1] if s else None, "reps": len(s)}


def selftest(expect, tmp):
    expect(abs(geomean([1, 4, 16]) - 4) < 1e-12, "geometric mean")
    expect(geomean([]) is None and geomean([None, 0, float("nan")]) is None, "geometric mean of nothing")
    st = summarize([5, 1, 4, 2, 3])
    expect((st["ms"], st["q1_ms"], st["q3_ms"], st["reps"]) == (3, 2, 4, 5), "median and quartiles")
    expect(summarize([1, 2, 3, 4])["ms"] == 2.5, "median of an even count")
