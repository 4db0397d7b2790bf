#!/usr/bin/env python3
"""FlashAttention-4's sm_90a kernels compiled without a GPU, as cubins and SASS.

FA4 (flash_attn.cute, CuTe DSL) compiles for a target named in the environment when no GPU
is there (FLASH_ATTENTION_ARCH picks its kernel path, CUTE_DSL_ARCH the compile target,
FLASH_ATTENTION_NUM_SMS its tile heuristics), and under torch's FakeTensorMode its interface
compiles without launching. This calls its forward or backward the way bench/bwd_compare.py
and bench/report.py do (bf16 or f16, [batch, seqlen, heads, d], 16k tokens and hidden 2048 as
the grid has them), keeps what the DSL compiled (CUTE_DSL_KEEP=cubin) and reads the cubins
with nvdisasm. bench/sass_loops.py then puts FA4's main loops beside flashtune's.

  python3 bench/fa4_sass.py --kind bwd --d 128 --seqlen 16384 --out fa4-bwd-d128
  python3 bench/fa4_sass.py --kind fwd --d 256 --causal --out fa4-fwd-d256c
  python3 bench/sass_loops.py fa4-bwd-d128/*main*.sass

Needs a Python with FA4 and torch (pip install flash-attn-4 nvidia-cutlass-dsl[cu13]: about
6 GB with torch's CUDA libraries, no GPU needed) and nvdisasm (bench/sass_loops.py says where
it looks). Its tile choices are its own heuristics' for the H100/H200 (132 SMs by default).
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--kind", choices=("fwd", "bwd"), required=True)
ap.add_argument("--d", type=int, default=128, help="head dim (128)")
ap.add_argument("--seqlen", type=int, default=4096, help="sequence length (4096); batch = 16384 / seqlen")
ap.add_argument("--hidden", type=int, default=2048, help="heads = hidden / d (2048)")
ap.add_argument("--heads-kv", type=int, default=0, help="K/V heads (default: as many as query heads)")
ap.add_argument("--causal", action="store_true")
ap.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
ap.add_argument("--arch", default="sm_90a", help="compile target (sm_90a)")
ap.add_argument("--num-sms", type=int, default=132)
ap.add_argument("--out", required=True, help="folder for the cubins and .sass files")
args = ap.parse_args()

out = os.path.abspath(args.out)
os.makedirs(out, exist_ok=True)
dump = os.path.join(out, "dump")
shutil.rmtree(dump, ignore_errors=True)
os.makedirs(dump)
os.environ.update({"FLASH_ATTENTION_ARCH": args.arch.rstrip("a"), "CUTE_DSL_ARCH": args.arch,
                   "FLASH_ATTENTION_NUM_SMS": str(args.num_sms), "CUTE_DSL_KEEP": "cubin",
                   "CUTE_DSL_DUMP_DIR": dump})

import torch  # noqa: E402  (after the environment above)
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from flash_attn.cute import interface  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_loops import find_nvdisasm  # noqa: E402

heads = args.hidden // args.d
heads_kv = args.heads_kv or heads
batch = max(1, 16384 // args.seqlen)
dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
with FakeTensorMode(allow_non_fake_inputs=True):
    dev = torch.device("cuda")
    q = torch.empty(batch, args.seqlen, heads, args.d, dtype=dtype, device=dev)
    k = torch.empty(batch, args.seqlen, heads_kv, args.d, dtype=dtype, device=dev)
    v = torch.empty_like(k)
    if args.kind == "fwd":
        interface._flash_attn_fwd(q, k, v, causal=args.causal, return_lse=True)
    else:
        o = torch.empty_like(q)
        do = torch.empty_like(q)
        lse = torch.empty(batch, heads, args.seqlen, dtype=torch.float32, device=dev)
        interface._flash_attn_bwd(q, k, v, o, do, lse, causal=args.causal)

nvdisasm = find_nvdisasm()
cubins = sorted(glob.glob(os.path.join(dump, "*.cubin")))
if not cubins:
    sys.exit("fa4_sass: the DSL kept no cubin in %s" % dump)
for i, cubin in enumerate(cubins):
    base = os.path.basename(cubin)
    role = ("pre" if "Preprocess" in base else "post" if "Postprocess" in base else "main")
    name = "%s-%d-%s" % (args.kind, i, role)
    shutil.copy(cubin, os.path.join(out, name + ".cubin"))
    if nvdisasm:
        sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout
        with open(os.path.join(out, name + ".sass"), "w") as fh:
            fh.write(sass)
    print("fa4_sass: %s (%s)" % (os.path.join(out, name + (".sass" if nvdisasm else ".cubin")), base[:100]))
if not nvdisasm:
    print("fa4_sass: no nvdisasm; cubins only")
