#!/usr/bin/env python3
"""The Python binding.

Part one needs no GPU: flashtune.check_tensors on CPU tensors refuses every out= (and input)
that the kernel cannot take, with a message naming the tensor, and Context.forward refuses it
before anything is launched. Part two needs a GPU: the binding against
torch.nn.functional.scaled_dot_product_attention over shapes, dtypes, causal masking,
grouped-query heads and strided views, and out= on the GPU.

Without PyTorch it exits 77 ("skipped"); with --checks it runs part one only (ctest
python_checks), else without a GPU it runs part one and then exits 77 for part two."""
import math
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("skipped: no PyTorch")
    sys.exit(77)
if not os.environ.get("FLASHTUNE_TEST_INSTALLED"):  # else the installed package (tests/pip_wheel.sh)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashtune  # noqa: E402

failures = 0


def report(ok, what):
    global failures
    failures += not ok
    print("%s: %s" % (what, "ok" if ok else "FAIL"))


def refused(what, expect, fn, exc=ValueError):
    """fn() must raise exc with expect in its message."""
    try:
        fn()
    except exc as e:
        report(expect in str(e), "%s: %s: %s" % (what, type(e).__name__, e))
        return
    except Exception as e:  # noqa: BLE001 - any other exception is a failure of the check
        report(False, "%s: %s instead of %s: %s" % (what, type(e).__name__, exc.__name__, e))
        return
    report(False, "%s: accepted" % what)


class _NoLaunch:
    """Stands in for the library in a Context without a GPU: any call is a launch that the
    checks should have prevented."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args):
            self.calls.append(name)
            return 0
        return call


def checks():
    """Part one: out= (and inputs) on CPU tensors."""
    b, sq, sk, hq, hkv, d = 2, 24, 40, 4, 2, 64
    f16 = torch.float16
    q = torch.randn(b, sq, hq, d, dtype=f16)
    k = torch.randn(b, sk, hkv, d, dtype=f16)
    v = torch.randn(b, sk, hkv, d, dtype=f16)
    check = flashtune.check_tensors

    def accepted(what, out, qq=q):
        try:
            check(qq, k, v, out)
            report(True, what)
        except Exception as e:  # noqa: BLE001
            report(False, "%s: refused: %s" % (what, e))

    accepted("out contiguous", torch.empty(b, sq, hq, d, dtype=f16))
    accepted("out a strided view (rows padded by 8 elements)", torch.empty(b, sq, hq, d + 8, dtype=f16)[..., :d])
    accepted("out head-major (a transposed view)", torch.empty(b, hq, sq, d, dtype=f16).transpose(1, 2))
    both = torch.empty(2, b, sq, hq, d, dtype=f16)
    accepted("out beside q in one buffer", both[1], qq=both[0].copy_(q))
    accepted("no out", None)

    refused("out of another seqlen", "out must be [batch, seqlen_q, heads_q, head_dim] = (2, 24, 4, 64)",
            lambda: check(q, k, v, torch.empty(b, sq + 1, hq, d, dtype=f16)))
    refused("out of another head dim", "= (2, 24, 4, 64), not (2, 24, 4, 32)",
            lambda: check(q, k, v, torch.empty(b, sq, hq, 32, dtype=f16)))
    refused("out with the K/V heads", "not (2, 24, 2, 64)",
            lambda: check(q, k, v, torch.empty(b, sq, hkv, d, dtype=f16)))
    refused("out 3-dimensional", "out must be [batch, seqlen, heads, head_dim], not 3-dimensional",
            lambda: check(q, k, v, torch.empty(b * sq, hq, d, dtype=f16)))
    refused("out float32", "out must be torch.float16 like q, not torch.float32",
            lambda: check(q, k, v, torch.empty(b, sq, hq, d)))
    refused("out bfloat16 for float16 inputs", "out must be torch.float16 like q, not torch.bfloat16",
            lambda: check(q, k, v, torch.empty(b, sq, hq, d, dtype=torch.bfloat16)))
    refused("out on another device", "out must be on q's device cpu, not meta",
            lambda: check(q, k, v, torch.empty(b, sq, hq, d, dtype=f16, device="meta")))
    refused("out's head dim not contiguous", "out's last dimension must be contiguous",
            lambda: check(q, k, v, torch.empty(b, sq, d, hq, dtype=f16).transpose(2, 3)))
    refused("out's strides not multiples of 8", "out's strides (6240, 260, 65) must be non-negative multiples of 8",
            lambda: check(q, k, v, torch.empty(b, sq, hq, d + 1, dtype=f16)[..., :d]))
    flat = torch.empty(b * sq * hq * d + 8, dtype=f16)
    refused("out not 16-byte aligned", "out is not 16-byte aligned",
            lambda: check(q, k, v, flat[1:1 + b * sq * hq * d].view(b, sq, hq, d)))
    refused("out expanded over the batch", "out's elements overlap each other (strides (0, 256, 64, 1))",
            lambda: check(q, k, v, torch.empty(1, sq, hq, d, dtype=f16).expand(b, sq, hq, d)))
    refused("out expanded over the heads", "out's elements overlap each other",
            lambda: check(q, k, v, torch.empty(b, sq, 1, d, dtype=f16).expand(b, sq, hq, d)))
    refused("out is q", "out shares memory with q", lambda: check(q, k, v, q))
    big = torch.empty(b, sk, hq, d, dtype=f16)  # v's heads and out in one buffer
    refused("out over v's memory", "out shares memory with v", lambda: check(q, k, big[:, :, :hkv], big[:, :sq]))
    refused("out a list", "out must be a torch.Tensor, not list", lambda: check(q, k, v, [0.0]), exc=TypeError)
    refused("v of another head dim", "k and v must be [batch, seqlen_k, heads_kv, head_dim] matching q",
            lambda: check(q, k, torch.empty(b, sk, hkv, 32, dtype=f16)))
    refused("k's strides not multiples of 8", "k's strides",
            lambda: check(q, torch.empty(b, sk, hkv, d + 4, dtype=f16)[..., :d], v))

    # Context.forward checks out= before it allocates or launches anything.
    ctx = flashtune.Context.__new__(flashtune.Context)
    ctx._lib, ctx._handle, ctx.device = _NoLaunch(), None, None
    refused("forward(out=too short)", "out must be",
            lambda: ctx.forward(q, k, v, out=torch.empty(b, sq - 1, hq, d, dtype=f16)))
    refused("forward(out=q)", "out shares memory with q", lambda: ctx.forward(q, k, v, out=q))
    refused("forward(out=float32, return_lse)", "out must be torch.float16",
            lambda: ctx.forward(q, k, v, out=torch.empty(b, sq, hq, d), return_lse=True))
    refused("forward(stream=not a stream)", "stream must be a torch.cuda.Stream, not int",
            lambda: ctx.forward(q, k, v, out=torch.empty(b, sq, hq, d, dtype=f16), stream=7), exc=TypeError)
    # A KV cache's index tensors are checked before anything is launched too.
    pool = torch.empty(10, 32, hkv, d, dtype=f16)
    table = torch.zeros(b, 3, dtype=torch.int32)
    refused("forward(cache_seqlens=int64)", "cache_seqlens must be an int32 [batch] tensor",
            lambda: ctx.forward(q, k, v, cache_seqlens=torch.zeros(b, dtype=torch.int64)))
    refused("forward(cache_seqlens of another batch)", "not torch.int32 (3,)",
            lambda: ctx.forward(q, k, v, cache_seqlens=torch.zeros(b + 1, dtype=torch.int32)))
    refused("forward(block_table 1-dimensional)", "block_table must be an int32 [batch, max_pages] tensor",
            lambda: ctx.forward(q, pool, pool, block_table=torch.zeros(b, dtype=torch.int32)))
    refused("forward(pages of 24 keys)", "must hold a multiple of 16 keys, not 24",
            lambda: ctx.forward(q, pool[:, :24], pool[:, :24], block_table=table))
    refused("forward(k_cache of another head dim)", "k_cache and v_cache must be [num_pages, page_size",
            lambda: ctx.forward(q, pool[..., :32], pool[..., :32], block_table=table))
    refused("attention_with_kvcache(k without v)", "k and v (the new tokens) come together",
            lambda: flashtune.attention_with_kvcache(q, pool, pool, k=k, block_table=table, context=ctx))
    refused("attention_with_kvcache(k without cache_seqlens)", "appending k and v needs cache_seqlens",
            lambda: flashtune.attention_with_kvcache(q, pool, pool, k=k, v=v, block_table=table, context=ctx))
    report(ctx._lib.calls == [], "nothing launched for a refused out=, stream= or KV cache (%s)" % ctx._lib.calls)
    # The SDPA-like call refuses what it does not compute, before anything runs.
    qh, kh = torch.empty(2, 8, 64, 64, dtype=f16), torch.empty(2, 2, 96, 64, dtype=f16)
    sdpa = flashtune.scaled_dot_product_attention
    refused("scaled_dot_product_attention(attn_mask=)", "attn_mask is not supported",
            lambda: sdpa(qh, qh, qh, attn_mask=torch.ones(64, 64, dtype=torch.bool)))
    refused("scaled_dot_product_attention(dropout_p=0.1)", "dropout_p must be 0", lambda: sdpa(qh, qh, qh, dropout_p=0.1))
    refused("scaled_dot_product_attention(8 query heads, 2 key heads)", "need enable_gqa=True",
            lambda: sdpa(qh, kh, kh))
    refused("scaled_dot_product_attention(is_causal, 64 queries, 96 keys)", "SDPA aligns its mask to the top left",
            lambda: sdpa(qh, kh, kh, is_causal=True, enable_gqa=True))
    refused("scaled_dot_product_attention(3-dimensional)", "must be a [batch, heads, seqlen, head_dim] tensor",
            lambda: sdpa(qh[0], qh[0], qh[0]))


checks()
if "--checks" in sys.argv[1:]:
    print("python checks: %d failures" % failures)
    sys.exit(1 if failures else 0)
if not torch.cuda.is_available():
    print("python checks: %d failures" % failures)
    if failures:
        sys.exit(1)
    print("skipped: no GPU")
    sys.exit(77)

ctx = flashtune.Context(database="")  # built-in defaults: the test must not depend on a tune
cases = [  # b, hq, hkv, sq, sk, d
    (1, 1, 1, 1, 1, 64), (2, 4, 4, 17, 17, 32), (1, 8, 2, 127, 1000, 128), (2, 6, 3, 1000, 127, 96),
    (1, 2, 2, 513, 513, 256), (3, 4, 1, 300, 300, 192), (1, 16, 16, 4096, 4096, 128),
    # decode: the short-query kernels, split keys (with the workspace from PyTorch's allocator)
    (2, 16, 2, 1, 5000, 128), (3, 8, 2, 3, 2049, 64), (1, 4, 4, 16, 777, 256),
]
for dtype in (torch.float16, torch.bfloat16):
    for causal in (False, True):
        for b, hq, hkv, sq, sk, d in cases:
            torch.manual_seed(b * 7 + hq + sq + d)
            # q through a transposed (head-major) view: strided input
            q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype).transpose(1, 2)
            k = torch.randn(b, sk, hkv, d, device="cuda", dtype=dtype)
            v = torch.randn(b, sk, hkv, d, device="cuda", dtype=dtype)
            o, lse = ctx.forward(q, k, v, causal=causal, return_lse=True)
            # SDPA's causal mask is top-left aligned; build flashtune's bottom-right one explicitly
            kk = k.repeat_interleave(hq // hkv, dim=2).transpose(1, 2).float()
            vv = v.repeat_interleave(hq // hkv, dim=2).transpose(1, 2).float()
            mask = None
            if causal:
                i = torch.arange(sq, device="cuda")[:, None]
                j = torch.arange(sk, device="cuda")[None, :]
                mask = j <= i + sk - sq
            ref = F.scaled_dot_product_attention(q.transpose(1, 2).float(), kk, vv, attn_mask=mask)
            if mask is not None:  # rows that see no key: flashtune defines O = 0
                ref = torch.where(mask.any(-1)[None, None, :, None], ref, torch.zeros_like(ref))
            ref = ref.transpose(1, 2)
            err = (o.float() - ref).abs().max().item()
            rel = ((o.float() - ref).norm() / ref.norm().clamp_min(1e-6)).item()
            bound = 2e-3 if dtype == torch.float16 else 1.6e-2
            ok = math.isfinite(err) and rel <= bound and not torch.isnan(lse).any().item()
            report(ok, "%-4s %s b=%d hq=%d hkv=%d sq=%d sk=%d d=%d: rel L2 %.2e, max %.2e" % (
                str(dtype).split(".")[1], "causal" if causal else "full  ", b, hq, hkv, sq, sk, d, rel, err))
# out= on the GPU: a strided view gets the same result as a fresh tensor, and its padding stays
# as it was; a wrong one is refused and the memory around it is not written.
q = torch.randn(2, 300, 4, 128, device="cuda", dtype=torch.float16)
kv = torch.randn(2, 500, 2, 128, device="cuda", dtype=torch.float16)
padded = torch.full((2, 300, 4, 136), 7.0, device="cuda", dtype=torch.float16)
o = ctx.forward(q, kv, kv, causal=True, out=padded[..., :128])
report(o.data_ptr() == padded.data_ptr() and torch.equal(o, ctx.forward(q, kv, kv, causal=True))
       and bool((padded[..., 128:] == 7.0).all().item()), "forward(out=strided view)")
refused("forward(out=on the CPU)", "out must be on cuda:0, not cpu",
        lambda: ctx.forward(q, kv, kv, out=torch.empty(2, 300, 4, 128, dtype=torch.float16)))
if torch.cuda.device_count() > 1:
    with torch.cuda.device(1):
        other = torch.cuda.Stream()
    refused("forward(stream=another GPU's)", "stream must be on q's device cuda:0, not cuda:1",
            lambda: ctx.forward(q, kv, kv, stream=other))
guard = torch.full((2 * 300 * 4 * 128,), 7.0, device="cuda", dtype=torch.float16)
refused("forward(out=too short) on the GPU", "out must be",
        lambda: ctx.forward(q, kv, kv, out=guard[:2 * 299 * 4 * 128].view(2, 299, 4, 128)))
torch.cuda.synchronize()
report(bool((guard == 7.0).all().item()), "a refused out= leaves its memory unwritten")
# A KV cache: attention_with_kvcache against SDPA on each sequence's keys, dense and paged (pages of
# 16, 64 and 256 keys in a shuffled pool, one page shared by two sequences where nothing is
# appended), lengths 0, 1, a page boundary and past it, new tokens appended into the cache first;
# paged and dense give the same bits.
def _kv_reference(q, k_rows, v_rows, causal):
    """SDPA of one sequence (q [1, sq, hq, d], keys [n, hkv, d]), O = 0 where a row sees no key."""
    sq, hq, n = q.shape[1], q.shape[2], k_rows.shape[0]
    if n == 0:
        return torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    g = hq // k_rows.shape[1]
    kk = k_rows.repeat_interleave(g, dim=1).transpose(0, 1)[None].float()
    vv = v_rows.repeat_interleave(g, dim=1).transpose(0, 1)[None].float()
    mask = None
    if causal:
        mask = torch.arange(n, device=q.device)[None, :] <= torch.arange(sq, device=q.device)[:, None] + n - sq
    ref = F.scaled_dot_product_attention(q.transpose(1, 2).float(), kk, vv, attn_mask=mask)
    if mask is not None:
        ref = torch.where(mask.any(-1)[None, None, :, None], ref, torch.zeros_like(ref))
    return ref.transpose(1, 2)


for page, (b, hq, hkv, sq, cap, d), new in ((16, (5, 16, 2, 1, 1008, 128), 1), (64, (5, 8, 8, 4, 704, 64), 0),
                                            (256, (6, 32, 4, 1, 3072, 128), 2)):  # cap: whole pages
    for causal in (False, True):
        dtype = torch.bfloat16 if causal else torch.float16
        torch.manual_seed(page + b + causal)
        lens = torch.tensor(([cap - new, 0, 1, page - new, page + 1 - new] + [int(x) for x in torch.randint(
            0, cap - new, (b,))])[:b], dtype=torch.int32, device="cuda")
        qc = torch.randn(b, sq, hq, d, device="cuda", dtype=dtype)
        kn = torch.randn(b, new, hkv, d, device="cuda", dtype=dtype) if new else None
        vn = torch.randn(b, new, hkv, d, device="cuda", dtype=dtype) if new else None
        dense_k = torch.randn(b, cap, hkv, d, device="cuda", dtype=dtype)
        dense_v = torch.randn(b, cap, hkv, d, device="cuda", dtype=dtype)
        per_seq = (cap + page - 1) // page
        order = torch.randperm(b * per_seq + 1, device="cuda")[:b * per_seq].view(b, per_seq).to(torch.int32)
        if not new:  # sequence 1 shares sequence 0's first page (read only: no tokens appended)
            order[1, 0] = order[0, 0]
            dense_k[1, :page], dense_v[1, :page] = dense_k[0, :page], dense_v[0, :page]
        pool_k = torch.full((b * per_seq + 1, page, hkv, d), float("nan"), device="cuda", dtype=dtype)
        pool_v = pool_k.clone()
        for s in range(b):
            for p in range(per_seq):
                rows = dense_k[s, p * page:(p + 1) * page].shape[0]
                pool_k[order[s, p], :rows] = dense_k[s, p * page:(p + 1) * page]
                pool_v[order[s, p], :rows] = dense_v[s, p * page:(p + 1) * page]
        kw = dict(k=kn, v=vn, cache_seqlens=lens, causal=causal, return_softmax_lse=True, context=ctx)
        o_dense, lse_dense = flashtune.attention_with_kvcache(qc, dense_k, dense_v, **kw)
        o_paged, lse_paged = flashtune.attention_with_kvcache(qc, pool_k, pool_v, block_table=order, **kw)
        worst = 0.0
        for s in range(b):
            n = int(lens[s]) + new
            ref = _kv_reference(qc[s:s + 1], dense_k[s, :n], dense_v[s, :n], causal)
            worst = max(worst, ((o_dense[s:s + 1].float() - ref).norm() / ref.norm().clamp_min(1e-6)).item()
                        if n else o_dense[s].float().abs().max().item())
        bound = 2e-3 if dtype == torch.float16 else 1.6e-2
        same = torch.equal(o_dense, o_paged) and torch.equal(lse_dense, lse_paged)
        report(math.isfinite(worst) and worst <= bound and same and not torch.isnan(o_dense).any().item(),
               "kv cache pages of %d, b=%d hq=%d hkv=%d sq=%d keys<=%d +%d new, %s: worst rel L2 %.2e, paged = dense "
               "bit for bit: %s" % (page, b, hq, hkv, sq, cap, new, "causal" if causal else "full", worst, same))
# A variable-length batch: varlen_attention against SDPA on each sequence alone (lengths 0 and 1
# included), decode and prefill-length, causal or not; the rows of a zero-length sequence's
# neighbours unaffected.
for qlens, klens, hq, hkv, d in (([1, 1, 1, 1, 1], [900, 0, 1, 64, 65], 16, 2, 128),
                                 ([5, 0, 16, 70], [5, 30, 100, 70], 8, 8, 64)):
    for causal in (False, True):
        dtype = torch.bfloat16 if causal else torch.float16
        torch.manual_seed(len(qlens) + d + causal)
        cu_q = torch.tensor([0] + qlens, device="cuda").cumsum(0).to(torch.int32)
        cu_k = torch.tensor([0] + klens, device="cuda").cumsum(0).to(torch.int32)
        qc = torch.randn(int(cu_q[-1]), hq, d, device="cuda", dtype=dtype)
        kc = torch.randn(int(cu_k[-1]), hkv, d, device="cuda", dtype=dtype)
        vc = torch.randn(int(cu_k[-1]), hkv, d, device="cuda", dtype=dtype)
        o, lse = flashtune.varlen_attention(qc, kc, vc, cu_q, cu_k, max(qlens), max(klens), causal=causal,
                                            return_softmax_lse=True, context=ctx)
        worst = 0.0
        for s in range(len(qlens)):
            if qlens[s] == 0:
                continue
            q0, k0 = int(cu_q[s]), int(cu_k[s])
            ref = _kv_reference(qc[None, q0:q0 + qlens[s]], kc[k0:k0 + klens[s]], vc[k0:k0 + klens[s]], causal)[0]
            got = o[q0:q0 + qlens[s]].float()
            worst = max(worst, ((got - ref).norm() / ref.norm().clamp_min(1e-6)).item() if klens[s]
                        else got.abs().max().item())
        bound = 2e-3 if dtype == torch.float16 else 1.6e-2
        report(math.isfinite(worst) and worst <= bound and tuple(lse.shape) == (hq, qc.shape[0]),
               "varlen_attention queries %s keys %s hq=%d hkv=%d d=%d %s: worst rel L2 %.2e" % (
                   qlens, klens, hq, hkv, d, "causal" if causal else "full", worst))
# The SDPA-like call on [batch, heads, seqlen, head_dim] tensors against SDPA itself: not causal
# with seqlen_q != seqlen_k, causal with them equal, grouped-query heads (enable_gqa), a scale;
# gradients too. And attention(return_lse=True): the LSE that Context.forward gives, not
# differentiable.
for b, hq, hkv, sq, sk, d, causal, scale in ((2, 8, 8, 100, 300, 64, False, None), (1, 16, 4, 257, 257, 128, True, 0.1),
                                             (2, 4, 2, 64, 64, 96, False, None)):
    torch.manual_seed(b + hq + sq + d)
    qh = torch.randn(b, hq, sq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    kh = torch.randn(b, hkv, sk, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    vh = torch.randn(b, hkv, sk, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    got = flashtune.scaled_dot_product_attention(qh, kh, vh, is_causal=causal, scale=scale, enable_gqa=hq != hkv)
    grads = torch.autograd.grad(got.float().square().sum(), (qh, kh, vh))
    qf, kf, vf = (t.detach().double().requires_grad_() for t in (qh, kh, vh))
    want = F.scaled_dot_product_attention(qf, kf.repeat_interleave(hq // hkv, 1), vf.repeat_interleave(hq // hkv, 1),
                                          is_causal=causal, scale=scale)
    wgrads = torch.autograd.grad(want.square().sum(), (qf, kf, vf))
    errs = [((x.double() - y).norm() / y.norm()).item() for x, y in zip((got,) + grads, (want,) + wgrads)]
    report(tuple(got.shape) == (b, hq, sq, d) and all(math.isfinite(e) and e < 3e-2 for e in errs),
           "scaled_dot_product_attention b=%d hq=%d hkv=%d sq=%d sk=%d d=%d causal=%d: rel L2 of O, dQ, dK, dV %s" % (
               b, hq, hkv, sq, sk, d, causal, ", ".join("%.1e" % e for e in errs)))
qa = torch.randn(2, 300, 8, 64, device="cuda", dtype=torch.float16, requires_grad=True)
o_lse, lse_a = flashtune.attention(qa, qa, qa, causal=True, return_lse=True)
o_ref, lse_ref = ctx.forward(qa.detach(), qa.detach(), qa.detach(), causal=True, return_lse=True)
# (the operator runs on the module's context, which may hold tuned kernels: close, not the same bits)
report(torch.allclose(o_lse, o_ref, rtol=0, atol=4e-3) and torch.allclose(lse_a, lse_ref, rtol=0, atol=2e-3) and
       not lse_a.requires_grad and o_lse.requires_grad,
       "attention(return_lse=True): O and the LSE of Context.forward, the LSE not differentiable")
o_ctx, lse_ctx = flashtune.attention(qa, qa, qa, causal=True, return_lse=True, context=ctx)
report(torch.equal(o_ctx, o_ref) and torch.equal(lse_ctx, lse_ref) and not lse_ctx.requires_grad,
       "attention(return_lse=True, context=): likewise through the autograd.Function")
# A decode call runs the short-query kernels (their variants have pack=).
qd = torch.randn(2, 1, 16, 128, device="cuda", dtype=torch.bfloat16)
kd = torch.randn(2, 5000, 2, 128, device="cuda", dtype=torch.bfloat16)
which = ctx.kernel(qd, kd, kd)
report(which.startswith("built-in default") and "pack=" in which, "kernel() of a decode call: %s" % which)
# Which kernel ran: the built-in default of the head dim (no database), named with its head dim.
which = ctx.kernel(q, q, q, causal=True)
report(which.startswith("built-in default") and "d=128," in which and "causal=1" in which, "kernel(): %s" % which)
try:
    ctx.kernel(q[:, :, :, :0], q[:, :, :, :0], q[:, :, :, :0])
    report(False, "kernel() with head_dim 0 did not fail")
except flashtune.FlashtuneError as e:
    print("kernel() with head_dim 0: %s: ok" % e)
# The library's diagnostic lines reach the logging module: a new context's first call of a
# bucket logs its kernel choice at DEBUG (FLASHTUNE_DEBUG unset: no stderr).
if not flashtune._env_on("FLASHTUNE_DEBUG"):
    import logging

    class _Keep(logging.Handler):
        def __init__(self):
            super().__init__(logging.DEBUG)
            self.lines = []

        def emit(self, record):
            self.lines.append((record.levelno, record.getMessage()))

    keep = _Keep()
    logger = logging.getLogger("flashtune")
    logger.addHandler(keep)
    logger.setLevel(logging.DEBUG)
    ctx2 = flashtune.Context(database="")
    ctx2.forward(q, q, q, causal=True)
    logger.removeHandler(keep)
    report(any(level == logging.DEBUG and line.startswith("fwd ") and "built-in default" in line
               for level, line in keep.lines), "diagnostics to logging: %s" % (keep.lines[:1],))
print("flashtune %s" % flashtune.version())
print("python binding: %d failures" % failures)
sys.exit(1 if failures else 0)
