#!/usr/bin/env python3
"""flashtune.attention under autograd, on a GPU (ctest gpu_python_bwd).

1. The fp64 reference (math attention with flashtune's bottom-right causal mask, autograd)
   passes torch.autograd.gradcheck on tiny shapes, so that it can be trusted below.
2. On random shapes (odd lengths, sq != sk both ways with rows that see no key, grouped-query
   heads, head-major and padded views, fp16 and bf16) the gradients of flashtune.attention are
   compared with the fp64 reference's: relative L2 error per gradient, next to the error of
   SDPA's own backend on the same inputs (where SDPA computes the same thing: not causal, or
   causal with sq == sk, where both alignments agree). flashtune must be no worse than 1.5 times
   SDPA's error plus a quarter of a unit roundoff (elsewhere: at most two unit roundoffs), and
   never NaN.
3. deterministic=True gives the same bits twice; the Context API takes given dq/dk/dv.
4. A tiny transformer trained for a few steps with flashtune's attention and with SDPA's from the
   same initial weights and data: the losses stay within 5 % of each other at every step; and
   the same model under torch.compile(model, fullgraph=True), flashtune's attention through its
   operators, trained for 10 steps: its losses too stay within 5 % of (eager) SDPA's.

Exits 77 ("skipped") without PyTorch or a GPU."""
import math
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("skipped: no PyTorch")
    sys.exit(77)
if not torch.cuda.is_available():
    print("skipped: no GPU")
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashtune  # noqa: E402

failures = 0


def report(ok, what):
    global failures
    failures += not ok
    print("%s: %s" % (what, "ok" if ok else "FAIL"))


def reference(q, k, v, causal, scale=None):
    """Attention as flashtune defines it, in q's dtype with autograd: [b, s, h, d] tensors,
    bottom-right causal alignment, rows that see no key give 0."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    kk = k.repeat_interleave(hq // hkv, dim=2)
    vv = v.repeat_interleave(hq // hkv, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    p = None
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        seen = j <= i + sk - sq
        # a finite fill, so that a row without keys has finite gradients; that row gives 0
        p = torch.softmax(s.masked_fill(~seen, -1e30), dim=-1) * seen.any(-1, keepdim=True)
    else:
        p = torch.softmax(s, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", p, vv)


def rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


# 1. The reference's own gradients against central differences.
torch.manual_seed(0)
for causal, (sq, sk, hq, hkv) in ((False, (5, 7, 2, 1)), (True, (7, 5, 2, 2)), (True, (4, 9, 4, 2))):
    args = [torch.randn(1, s, h, 8, dtype=torch.float64, device="cuda", requires_grad=True)
            for s, h in ((sq, hq), (sk, hkv), (sk, hkv))]
    ok = torch.autograd.gradcheck(lambda q, k, v: reference(q, k, v, causal), args, eps=1e-6, atol=1e-7)
    report(ok, "gradcheck of the fp64 reference, causal=%d sq=%d sk=%d hq=%d hkv=%d" % (causal, sq, sk, hq, hkv))

# 2. flashtune's gradients against the fp64 reference, next to SDPA's.
cases = [  # b, hq, hkv, sq, sk, d, causal
    (1, 1, 1, 1, 7, 64, False), (2, 4, 4, 17, 17, 32, True), (1, 8, 2, 127, 1000, 128, True),
    (2, 6, 3, 1000, 127, 96, True), (1, 2, 2, 513, 513, 256, False), (3, 4, 1, 300, 300, 192, True),
    (1, 4, 4, 4097, 4097, 128, True), (2, 8, 8, 1000, 1000, 64, False), (1, 16, 2, 256, 2048, 128, False),
    # odd multiples of 8: tiles the head dim rounded up to 16 wide, zeros past it
    (2, 4, 2, 333, 333, 72, True), (1, 8, 2, 1000, 1000, 88, False), (1, 4, 4, 300, 257, 200, True),
]
for dtype in (torch.float16, torch.bfloat16):
    u = 2.0 ** -11 if dtype == torch.float16 else 2.0 ** -8
    for n, (b, hq, hkv, sq, sk, d, causal) in enumerate(cases):
        torch.manual_seed(100 + n)
        # q head-major (a transposed view), k and v rows padded by 8 elements
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype).transpose(1, 2).requires_grad_()
        k = torch.randn(b, sk, hkv, d + 8, device="cuda", dtype=dtype)[..., :d].requires_grad_()
        v = torch.randn(b, sk, hkv, d + 8, device="cuda", dtype=dtype)[..., :d].requires_grad_()
        do = torch.randn(b, sq, hq, d, device="cuda", dtype=dtype)
        o = flashtune.attention(q, k, v, causal=causal)
        o.backward(do)
        got = (q.grad, k.grad, v.grad)
        q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
        reference(q64, k64, v64, causal).backward(do.double())
        want = (q64.grad, k64.grad, v64.grad)
        errs = [rel(g, w) for g, w in zip(got, want)]
        sdpa = None
        if not causal or sq == sk:
            qs, ks, vs = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
            os_ = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, enable_gqa=hq != hkv)
            os_.backward(do.transpose(1, 2))
            sdpa = [rel(t.grad.transpose(1, 2), w) for t, w in zip((qs, ks, vs), want)]
        finite = all(torch.isfinite(g).all().item() for g in got)
        if sdpa is not None:
            ok = finite and all(e <= 1.5 * s + u / 4 for e, s in zip(errs, sdpa))
            versus = "SDPA %.2e %.2e %.2e" % tuple(sdpa)
        else:  # SDPA's causal mask is top-left: no comparison; the bound of a rounding or two
            ok = finite and all(e <= 2 * u for e in errs)
            versus = "bound %.2e" % (2 * u)
        report(ok, "%-8s b=%d hq=%d hkv=%d sq=%d sk=%d d=%d causal=%d: dQ %.2e dK %.2e dV %.2e (%s)" % (
            str(dtype).split(".")[1], b, hq, hkv, sq, sk, d, causal, errs[0], errs[1], errs[2], versus))

# 3. Determinism, and the Context API with given outputs.
ctx = flashtune.Context(database="")
torch.manual_seed(7)
q = torch.randn(2, 1000, 8, 128, device="cuda", dtype=torch.bfloat16)
k = torch.randn(2, 1000, 2, 128, device="cuda", dtype=torch.bfloat16)
v = torch.randn(2, 1000, 2, 128, device="cuda", dtype=torch.bfloat16)
do = torch.randn_like(q)
o, lse = ctx.forward(q, k, v, causal=True, return_lse=True)
runs = [ctx.backward(q, k, v, o, lse, do, causal=True, deterministic=True) for _ in range(3)]
report(all(torch.equal(a, b) for r in runs[1:] for a, b in zip(runs[0], r)), "deterministic=True: the same bits 3 times")
print("deterministic kernel: %s" % ctx.backward_kernel(q, k, v, causal=True, deterministic=True))
print("default kernel: %s" % ctx.backward_kernel(q, k, v, causal=True))
dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
got = ctx.backward(q, k, v, o, lse, do, causal=True, dq=dq, dk=dk, dv=dv)
report(got[0] is dq and got[1] is dk and got[2] is dv and
       all(rel(a, b.double()) < 1e-2 for a, b in zip(got, runs[0])),
       "backward(dq=, dk=, dv=) writes the given tensors (what the deterministic kernel gives, to rounding)")
try:
    ctx.backward(q, k, v, o, lse, do, dq=torch.empty_like(k))
    report(False, "backward(dq of K's shape) accepted")
except ValueError as e:
    report("dq must be" in str(e), "backward(dq of K's shape): %s" % e)

# 4. A tiny transformer, trained with flashtune and with SDPA from the same start.
class Block(torch.nn.Module):
    def __init__(self, dim, heads, use_flashtune):
        super().__init__()
        self.heads, self.ft = heads, use_flashtune
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))
        self.n1, self.n2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)

    def forward(self, x):
        b, s, dim = x.shape
        q, k, v = self.qkv(self.n1(x)).to(torch.bfloat16).view(b, s, 3, self.heads, dim // self.heads).unbind(2)
        if self.ft:
            a = flashtune.attention(q, k, v, causal=True)
        else:
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True).transpose(1, 2)
        x = x + self.proj(a.reshape(b, s, dim).float())
        return x + self.mlp(self.n2(x))


class Tiny(torch.nn.Module):
    """An embedding, two blocks and a head: the logits of every position."""

    def __init__(self, vocab, dim, use_flashtune):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, 2, use_flashtune) for _ in range(2))
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.emb(tokens)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def train(use_flashtune, steps=30, compiled=False):
    """The losses of `steps` steps of Adam from one initial model on one batch. compiled: the
    model runs under torch.compile(model, fullgraph=True), its forward and backward one graph
    each (flashtune's attention through its operators)."""
    torch.manual_seed(1234)
    vocab, dim = 256, 128
    model = Tiny(vocab, dim, use_flashtune).cuda()
    run = torch.compile(model, fullgraph=True) if compiled else model
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    data = torch.randint(0, vocab, (8, 257), device="cuda", generator=torch.Generator("cuda").manual_seed(5))
    data[:, 1::2] = data[:, 0:-1:2]  # a pattern to learn: every second token repeats the one before
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(run(data[:, :-1]).reshape(-1, vocab), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


ft_losses, sdpa_losses = train(True), train(False)
worst = max(abs(a - b) / b for a, b in zip(ft_losses, sdpa_losses))
print("losses (flashtune / SDPA): " + ", ".join("%.3f/%.3f" % p for p in list(zip(ft_losses, sdpa_losses))[::5]))
report(worst < 0.05 and ft_losses[-1] < 0.8 * ft_losses[0] and all(math.isfinite(x) for x in ft_losses),
       "training: losses within %.1f %% of SDPA's at every step, %.3f -> %.3f" % (100 * worst, ft_losses[0],
                                                                                ft_losses[-1]))


def compiled_training_check(sdpa_losses, steps=10):
    """The tiny transformer under torch.compile(model, fullgraph=True) with flashtune's attention
    (its operators: no context), trained for `steps` steps from the same start: its losses
    against eager SDPA's first ones, within the eager comparison's 5 %."""
    if not flashtune._ops_registered():
        print("torch.compile training: left out (no torch.library operators, reported below)")
        return
    # Count the forward and backward calls that reach flashtune's library, so that a compiled
    # model that ran some other attention cannot pass.
    calls = {"forward": 0, "backward": 0}
    originals = {name: getattr(flashtune.Context, name) for name in calls}

    def counting(name):
        def call(self, *args, **kwargs):
            calls[name] += 1
            return originals[name](self, *args, **kwargs)
        return call

    try:
        for name in calls:
            setattr(flashtune.Context, name, counting(name))
        losses = train(True, steps=steps, compiled=True)
    except Exception as e:  # noqa: BLE001
        report(False, "torch.compile(model, fullgraph=True) training: %s: %s" % (
            type(e).__name__, (str(e).splitlines() or [""])[0][:300]))
        return
    finally:
        for name, fn in originals.items():
            setattr(flashtune.Context, name, fn)
    # two blocks: at least two forward and two backward calls a step
    report(calls["forward"] >= 2 * steps and calls["backward"] >= 2 * steps,
           "torch.compile training ran flashtune's kernels: %d forward and %d backward calls in %d steps" % (
               calls["forward"], calls["backward"], steps))
    worst = max(abs(a - b) / b for a, b in zip(losses, sdpa_losses))
    print("losses (compiled flashtune / eager SDPA): " + ", ".join(
        "%.3f/%.3f" % p for p in list(zip(losses, sdpa_losses))[::3]))
    report(worst < 0.05 and losses[-1] < losses[0] and all(math.isfinite(x) for x in losses),
           "training under torch.compile(model, fullgraph=True): losses within %.1f %% of SDPA's at each of %d "
           "steps, %.3f -> %.3f" % (100 * worst, steps, losses[0], losses[-1]))


# The torch.library operators: registered at import, checked by opcheck (schema, fake
# implementation, autograd registration), kept in one graph by torch.compile(fullgraph=True), and
# captured by a CUDA graph; each against the eager call's outputs and gradients.
def ops_checks():
    if not flashtune._ops_registered():
        report(False, "torch.library operators registered at import (torch %s)" % torch.__version__)
        return
    report(True, "torch.library operators registered at import")
    torch.manual_seed(3)
    q = torch.randn(2, 64, 4, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 96, 2, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(2, 96, 2, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    for causal in (False, True):
        try:
            torch.library.opcheck(torch.ops.flashtune.attention_fwd.default, (q, k, v, causal, None, False))
            report(True, "opcheck flashtune::attention_fwd causal=%d" % causal)
        except Exception as e:  # noqa: BLE001
            report(False, "opcheck flashtune::attention_fwd causal=%d: %s" % (causal, str(e).splitlines()[0][:300]))
    with torch.no_grad():
        o, lse = torch.ops.flashtune.attention_fwd(q, k, v, True, None, False)
        do = torch.randn_like(o)
    try:
        torch.library.opcheck(torch.ops.flashtune.attention_bwd.default, (do, q.detach(), k.detach(), v.detach(), o, lse,
                                                                          True, None, False),
                              test_utils=("test_schema", "test_faketensor"))
        report(True, "opcheck flashtune::attention_bwd")
    except Exception as e:  # noqa: BLE001
        report(False, "opcheck flashtune::attention_bwd: %s" % str(e).splitlines()[0][:300])

    # deterministic: dQ's additions in a fixed order, so that two runs can be compared bit for bit
    def attn(q, k, v):
        return flashtune.attention(q, k, v, causal=True, deterministic=True)

    def step(q, k, v, do):
        out = attn(q, k, v)
        return torch.autograd.grad(out, (q, k, v), do), out

    (gq, gk, gv), out = step(q, k, v, do)
    try:
        compiled = torch.compile(attn, fullgraph=True)
        cout = compiled(q, k, v)
        cq, ck, cv = torch.autograd.grad(cout, (q, k, v), do)
        same = all(torch.equal(a, b) for a, b in ((cout, out), (cq, gq), (ck, gk), (cv, gv)))
        report(same, "torch.compile(fullgraph=True): one graph, the eager outputs and gradients bit for bit")
    except Exception as e:  # noqa: BLE001
        report(False, "torch.compile(fullgraph=True): %s" % str(e).splitlines()[0][:300])
    try:
        sq, sk_, sv = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
        sdo = do.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step(sq, sk_, sv, sdo)  # warm: the kernels are built before capture
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            (hq, hk, hv), hout = step(sq, sk_, sv, sdo)
        with torch.no_grad():
            sq.mul_(0.5)
        graph.replay()
        torch.cuda.synchronize()
        (rq, rk, rv), rout = step(sq, sk_, sv, sdo)
        same = all(torch.equal(a, b) for a, b in ((hout, rout), (hq, rq), (hk, rk), (hv, rv)))
        report(same and not torch.equal(hout, out),
               "CUDA graph: a replay on new inputs gives the eager outputs and gradients bit for bit")
    except Exception as e:  # noqa: BLE001
        report(False, "CUDA graph capture and replay: %s" % str(e).splitlines()[0][:300])


# The serving operators (flashtune::kvcache_fwd, flashtune::varlen_fwd): opcheck, and a decode
# step with new tokens appended to a paged cache under torch.compile(fullgraph=True) against the
# eager step: the same outputs and caches bit for bit.
def serving_ops_checks():
    if not flashtune._ops_registered() or not hasattr(torch.ops.flashtune, "kvcache_fwd"):
        report(False, "the serving operators registered at import")
        return
    torch.manual_seed(5)
    b, hq, hkv, d, page, pages = 3, 8, 2, 128, 64, 4
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.bfloat16)
    pool_k = torch.randn(b * pages, page, hkv, d, device="cuda", dtype=torch.bfloat16)
    pool_v = torch.randn_like(pool_k)
    table = torch.randperm(b * pages, device="cuda").view(b, pages).to(torch.int32)
    lens = torch.tensor([200, 0, 64], device="cuda", dtype=torch.int32)
    checks = (("kvcache_fwd paged", torch.ops.flashtune.kvcache_fwd.default, (q, pool_k, pool_v, lens, table, True, None)),
              ("kvcache_fwd dense", torch.ops.flashtune.kvcache_fwd.default,
               (q, pool_k.view(b, pages * page, hkv, d)[:, :255], pool_v.view(b, pages * page, hkv, d)[:, :255], lens,
                None, False, 0.1)))
    cu_q = torch.tensor([0, 1, 5, 5], device="cuda", dtype=torch.int32)
    cu_k = torch.tensor([0, 100, 130, 131], device="cuda", dtype=torch.int32)
    vq = torch.randn(5, hq, d, device="cuda", dtype=torch.float16)
    vk = torch.randn(131, hkv, d, device="cuda", dtype=torch.float16)
    vv = torch.randn_like(vk)
    checks += (("varlen_fwd", torch.ops.flashtune.varlen_fwd.default, (vq, vk, vv, cu_q, cu_k, 4, 100, True, None, None)),)
    for name, op, args in checks:
        try:
            torch.library.opcheck(op, args)
            report(True, "opcheck flashtune::%s" % name)
        except Exception as e:  # noqa: BLE001
            report(False, "opcheck flashtune::%s: %s" % (name, str(e).splitlines()[0][:300]))

    def step(q, kc, vc, kn, vn, lens, table):
        return flashtune.attention_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=lens, block_table=table,
                                                causal=True)

    kn = torch.randn(b, 1, hkv, d, device="cuda", dtype=torch.bfloat16)
    vn = torch.randn_like(kn)
    try:
        ek, ev = pool_k.clone(), pool_v.clone()
        eager = step(q, ek, ev, kn, vn, lens, table)
        ck, cv = pool_k.clone(), pool_v.clone()
        got = torch.compile(step, fullgraph=True)(q, ck, cv, kn, vn, lens, table)
        same = torch.equal(eager, got) and torch.equal(ek, ck) and torch.equal(ev, cv) and not torch.equal(ek, pool_k)
        report(same, "torch.compile(fullgraph=True) of a decode step appending to a paged cache: eager's output and "
               "caches bit for bit")
    except Exception as e:  # noqa: BLE001
        report(False, "torch.compile of a decode step: %s" % str(e).splitlines()[0][:300])


ops_checks()
compiled_training_check(sdpa_losses)
serving_ops_checks()
print("python backward: %d failures" % failures)
sys.exit(1 if failures else 0)
