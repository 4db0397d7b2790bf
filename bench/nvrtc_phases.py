#!/usr/bin/env python3
"""Where NVRTC's time goes for one variant: each variant's source (`flashtune gen`) compiled by
libnvrtc with flashtune's own options (runtime/nvrtc.c) plus --time, which makes NVRTC write
the time of each phase (the C++ front end, the NVVM optimizer, the PTX translation by ptxas)
to a CSV file. Runs on the CPU; no GPU needed. The median of --repeat compiles per variant.

    python3 bench/nvrtc_phases.py --flashtune build/flashtune --repeat 3 --json phases.json \\
        'flash_fwd_sm90 sm_90a d=128,bm=128,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1'

Each positional argument is "SPEC ARCH VARIANT"; without any, the built-in defaults listed
below. --option adds an NVRTC option to every compile (to see what one changes).
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULTS = [
    "flash_fwd_sm90 sm_90a d=64,bm=128,bn=176,stages=3,causal=0,dtype=bf16,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
    "flash_fwd_sm90 sm_90a d=128,bm=128,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
    "flash_fwd_sm90 sm_90a d=256,bm=128,bn=80,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
    "flash_fwd_sm90 sm_90a d=80,bm=128,bn=128,stages=2,causal=0,dtype=bf16,pingpong=1,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
    "flash_fwd sm_80 d=128,bm=128,bn=64,warps=4,stages=1,causal=1,dtype=bf16,qreg=0,overlap=0",
    "flash_decode sm_80 d=128,bn=16,warps=4,stages=2,mt=2,pack=1,causal=0,dtype=bf16",
    "flash_bwd_sm90 sm_90a d=128,bm=64,bn=128,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,causal=1,dtype=bf16",
    "flash_bwd sm_80 d=128,bm=64,bn=128,warps=8,split=2,stages=2,gqa=loop,det=0,causal=0,dtype=bf16",
]
# runtime/nvrtc.c's base options (the target comes first)
BASE = ["--std=c++17", "--ptxas-options=-v", "--no-cache"]


def load_nvrtc():
    for name in ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", ctypes.util.find_library("nvrtc")):
        for d in (os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/lib64", ""):
            if not name:
                continue
            try:
                return ctypes.CDLL(os.path.join(d, name) if d else name)
            except OSError:
                pass
    sys.exit("nvrtc_phases: cannot load libnvrtc")


def compile_once(nv, src, arch, extra):
    with tempfile.NamedTemporaryFile(suffix=".csv") as csv:
        opts = ["--gpu-architecture=" + arch] + BASE + ["--time=" + csv.name] + extra
        prog = ctypes.c_void_p()
        if nv.nvrtcCreateProgram(ctypes.byref(prog), src, b"variant.cu", 0, None, None) != 0:
            sys.exit("nvrtc_phases: nvrtcCreateProgram failed")
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        t0 = time.perf_counter()
        rc = nv.nvrtcCompileProgram(prog, len(opts), arr)
        wall = (time.perf_counter() - t0) * 1000
        size = ctypes.c_size_t()
        nv.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        nv.nvrtcDestroyProgram(ctypes.byref(prog))
        if rc != 0:
            sys.exit(f"nvrtc_phases: compile failed ({rc})")
        phases = {}
        for line in open(csv.name).read().splitlines():  # a header line only in a new file
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 4 and parts[2].replace(".", "", 1).isdigit():
                phases[parts[1]] = float(parts[2])
        return wall, phases, size.value


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="*")
    ap.add_argument("--flashtune", default="build/flashtune")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--option", action="append", default=[], help="an extra NVRTC option")
    ap.add_argument("--json")
    a = ap.parse_args()
    nv = load_nvrtc()
    rows = []
    print(f"{'variant':96s} {'front end':>9s} {'NVVM':>7s} {'ptxas':>7s} {'wall':>7s}  (ms, median of {a.repeat})")
    for item in a.variants or DEFAULTS:
        spec, arch, variant = item.split(" ", 2)
        src = subprocess.run([a.flashtune, "gen", spec, "--variant", variant, "--arch", arch],
                             check=True, capture_output=True).stdout
        runs = [compile_once(nv, src, arch, a.option) for _ in range(a.repeat)]
        med = lambda k: statistics.median(r[1].get(k, 0.0) for r in runs)
        row = {"spec": spec, "arch": arch, "variant": variant, "source_bytes": len(src),
               "front_end_ms": med("CUDA C++ Frontend"), "nvvm_ms": med("NVVM Optimizer"),
               "ptxas_ms": med("PTX Translation"), "wall_ms": statistics.median(r[0] for r in runs),
               "cubin_bytes": runs[0][2], "options": a.option}
        rows.append(row)
        print(f"{spec + ' ' + variant:96s} {row['front_end_ms']:9.0f} {row['nvvm_ms']:7.0f} {row['ptxas_ms']:7.0f} "
              f"{row['wall_ms']:7.0f}")
    tot = {k: sum(r[k] for r in rows) for k in ("front_end_ms", "nvvm_ms", "ptxas_ms", "wall_ms")}
    print("shares of the phases' sum: front end %.1f %%, NVVM optimizer %.1f %%, ptxas %.1f %%" % tuple(
        100 * tot[k] / (tot["front_end_ms"] + tot["nvvm_ms"] + tot["ptxas_ms"]) for k in ("front_end_ms", "nvvm_ms", "ptxas_ms")))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"nvrtc_options": BASE + a.option, "repeat": a.repeat, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
