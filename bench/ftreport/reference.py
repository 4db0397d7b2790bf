"""The output check: an fp64 attention on sampled rows of sampled (batch, head) pairs, and the
errors of a system's output (and log-sum-exp) against it under the dtype's tolerance. PyTorch is
handed in, never imported here."""
import math


def reference(torch, q, k, v, causal, rows_n, scale):
    """fp64 attention on sampled rows of sampled (batch, head) pairs; q/k/v in [b, h, s, d], k and
    v with h / group heads (query head hi reads K/V head hi // group)."""
    b, h, s, _ = q.shape
    group = h // k.shape[1]
    rows = torch.unique(torch.linspace(0, s - 1, min(rows_n, s), device=q.device).round().long())
    ref = {}
    for bi in sorted({0, b - 1}):
        for hi in sorted({0, h // 2, h - 1}):
            qf = q[bi, hi].index_select(0, rows).double()
            kf, vf = k[bi, hi // group].double(), v[bi, hi // group].double()
            sc = (qf @ kf.T) * scale
            if causal:  # square: top-left and bottom-right alignment agree
                cols = torch.arange(s, device=q.device)
                sc = sc.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
            lse = torch.logsumexp(sc, dim=-1)
            ref[(bi, hi)] = (torch.exp(sc - lse[:, None]) @ vf, lse)
    return rows, ref


def check(torch, out_bhsd, lse, rows, ref, tol):
    """Errors of one output against the reference; 'ok' against tol."""
    err2 = ref2 = 0.0
    max_abs = lse_err = 0.0
    finite = True
    for (bi, hi), (ro, rl) in ref.items():
        o = out_bhsd[bi, hi].index_select(0, rows).double()
        finite = finite and bool(torch.isfinite(o).all())
        diff = (o - ro)
        err2 += float((diff * diff).sum())
        ref2 += float((ro * ro).sum())
        max_abs = max(max_abs, float(diff.abs().max()))
        if lse is not None:
            lse_err = max(lse_err, float((lse[bi, hi].index_select(0, rows).double() - rl).abs().max()))
    rel = math.sqrt(err2 / ref2) if ref2 > 0 else math.sqrt(err2)
    res = {"rel_l2": rel, "max_abs": max_abs, "finite": finite}
    ok = finite and rel <= tol["rel_l2"] and max_abs <= tol["max_abs"]
    if lse is not None:
        res["lse_max_abs"] = lse_err
        ok = ok and lse_err <= tol["lse"]
    res["ok"] = bool(ok)
    return res
