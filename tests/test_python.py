#!/usr/bin/env python3
"""The Python binding against torch.nn.functional.scaled_dot_product_attention, over shapes,
dtypes, causal masking, grouped-query heads and strided views. Needs a GPU and PyTorch;
exits 77 ("skipped") without them."""
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

ctx = flashtune.Context(database="")  # built-in defaults: the test must not depend on a tune
failures = 0
cases = [  # b, hq, hkv, sq, sk, d
    (1, 1, 1, 1, 1, 64), (2, 4, 4, 17, 17, 32), (1, 8, 2, 127, 1000, 128), (2, 6, 3, 1000, 127, 96),
    (1, 2, 2, 513, 513, 256), (3, 4, 1, 300, 300, 192), (1, 16, 16, 4096, 4096, 128),
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
            failures += not ok
            print("%-4s %s b=%d hq=%d hkv=%d sq=%d sk=%d d=%d: rel L2 %.2e, max %.2e %s" % (
                str(dtype).split(".")[1], "causal" if causal else "full  ", b, hq, hkv, sq, sk, d, rel, err,
                "ok" if ok else "FAIL"))
# Which kernel ran: the built-in default of the head dim (no database), named with its head dim.
q = torch.randn(2, 300, 4, 128, device="cuda", dtype=torch.float16)
which = ctx.kernel(q, q, q, causal=True)
ok = which.startswith("built-in default") and "d=128," in which and "causal=1" in which
failures += not ok
print("kernel(): %s %s" % (which, "ok" if ok else "FAIL"))
try:
    ctx.kernel(q[:, :, :, :0], q[:, :, :, :0], q[:, :, :, :0])
    failures += 1
    print("kernel() with head_dim 0 did not fail: FAIL")
except flashtune.FlashtuneError as e:
    print("kernel() with head_dim 0: %s: ok" % e)
print("flashtune %s" % flashtune.version())
print("python binding: %d failures" % failures)
sys.exit(1 if failures else 0)
