"""FlashAttention-2's backward (PyTorch SDPA, FLASH_ATTENTION backend) on the harness's timing grid,
measured the same way (CUDA events, 3 warm-up runs, median of 25, 256 MiB cleared before each run),
so that tests/bwd/run.sh --bench can put both side by side in one run.

    python3 tests/bwd/fa2_bench.py [--out FILE.json]
"""
import argparse
import json
import math
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import torch.nn.functional as F
    except ImportError as e:  # no PyTorch here: nothing to compare with
        print(f"fa2_bench: PyTorch is not available ({e})")
        return 0
    dev = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        for d in (64, 128):
            for causal in (False, True):
                tflops = []
                for s in (1024, 2048, 4096, 8192, 16384):
                    b, h = 16384 // s, 2048 // d
                    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=dtype, requires_grad=True) for _ in range(3))
                    do = torch.randn(b, h, s, d, device=dev, dtype=dtype)
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        times = []
                        for rep in range(28):
                            flush.fill_(rep & 0xFF)
                            start = torch.cuda.Event(enable_timing=True)
                            stop = torch.cuda.Event(enable_timing=True)
                            start.record()
                            torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
                            stop.record()
                            stop.synchronize()
                            if rep >= 3:
                                times.append(start.elapsed_time(stop))
                    times.sort()
                    ms = times[len(times) // 2]
                    flops = 2.5 * 4 * b * h * s * s * d * (0.5 if causal else 1.0)
                    tf = flops / (ms * 1e-3) / 1e12
                    tflops.append(tf)
                    rows.append({"dtype": str(dtype).split(".")[-1], "d": d, "causal": int(causal), "seqlen": s,
                                 "ms": round(ms, 4), "tflops": round(tf, 2)})
                    del q, k, v, do, out
                gm = math.exp(sum(math.log(t) for t in tflops) / len(tflops))
                print(f"  FA2 bwd {str(dtype).split('.')[-1]:8s} d={d:3d} causal={int(causal)}: "
                      + " ".join(f"{t:6.1f}" for t in tflops) + f"  geometric mean {gm:6.1f} TFLOP/s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"fa2_backward": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
