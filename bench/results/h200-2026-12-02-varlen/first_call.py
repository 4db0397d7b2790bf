import os, sys, time, json
import torch
sys.path.insert(0, "python")
torch.empty(1, device="cuda")
q = torch.randn(1, 128, 8, 64, device="cuda", dtype=torch.bfloat16)
k, v = torch.randn_like(q), torch.randn_like(q)
torch.cuda.synchronize()
out = {}
t = time.perf_counter(); import flashtune; out["import_ms"] = (time.perf_counter() - t) * 1e3
t = time.perf_counter(); ctx = flashtune.Context(); out["context_ms"] = (time.perf_counter() - t) * 1e3
for key in ("ctx_first_ms", "ctx_second_ms"):
    t = time.perf_counter(); ctx.forward(q, k, v); torch.cuda.synchronize(); out[key] = (time.perf_counter() - t) * 1e3
for key in ("op_first_ms", "op_second_ms"):
    t = time.perf_counter(); flashtune.attention(q, k, v); torch.cuda.synchronize(); out[key] = (time.perf_counter() - t) * 1e3
print(json.dumps(out))
