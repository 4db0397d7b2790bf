#!/usr/bin/env python3
"""The main loops of sm_90a kernels, instruction by instruction, without a GPU.

For every kernel in the given SASS listings (nvdisasm -c, or cuobjdump -sass) or cubins, finds
the loops whose body issues at least --min-hgmma HGMMA and counts what one trip issues along
its fall-through path: a forward branch with a predicate is taken as not taken (the unmasked
block; the mbarrier's ready case), one without is taken (over the other arm), and a backward
branch other than the loop's own closes a retry loop, not taken. Instructions are grouped
(uniform datapath, floating point, integer, shared memory, synchronisation) and put against
the trip's tensor work: the FLOPs of its HGMMAs (2·M·N·K each, one warpgroup's), so that
kernels with other tiles compare per unit of work; and how many instructions the trip issues
before its first HGMMA (at a trip's start the tensor cores wait for them).

  python3 bench/sass_loops.py ours.sass theirs.sass
  python3 bench/sass_loops.py --flashtune build/flashtune --variant d=128,... specs/flash_bwd_sm90.lua
  python3 bench/sass_loops.py --json out.json a.cubin

A cubin is read with nvdisasm from $NVDISASM, PATH, /usr/local/cuda/bin or the copy
scripts/setup.sh fetches into ~/.cache/flashtune/tools. bench/fa4_sass.py writes
FlashAttention-4's kernels for the same comparison.
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

GROUPS = (
    ("uniform", lambda op: op.startswith("U") or op in ("R2UR", "S2UR")),
    ("float", lambda op: op in ("FFMA", "FMUL", "FADD", "FSEL", "FMNMX", "MUFU", "F2FP", "FSETP", "FCHK", "HADD2",
                                "HFMA2", "HMUL2", "F2F")),
    ("shared", lambda op: op in ("LDS", "STS", "LDSM", "STSM")),
    ("global", lambda op: op in ("LDG", "STG", "RED", "REDG", "ATOMG", "UTMALDG", "UTMASTG", "UBLKRED", "UBLKCP")),
    ("sync", lambda op: op in ("BAR", "SYNCS", "MEMBAR", "FENCE", "WARPGROUP", "DEPBAR", "BRA", "NANOSLEEP",
                               "WARPSYNC", "BSSY", "BSYNC", "ELECT")),
    ("int", lambda op: True),
)

LABEL = re.compile(r"^\s*\.(L_x_\d+):")
INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
FUNC = re.compile(r"^\s*//-+ \.text\.(\S+)")
BRANCH = re.compile(r"^(@!?U?P[T0-6])?\s*BRA(\.U|\.DIV)?\s+.*?(L_x_\d+)")
HGMMA = re.compile(r"HGMMA\.(\d+)x(\d+)x(\d+)")


def find_nvdisasm():
    for c in (os.environ.get("NVDISASM"), shutil.which("nvdisasm"), "/usr/local/cuda/bin/nvdisasm",
              os.path.expanduser("~/.cache/flashtune/tools/nvidia/cu13/bin/nvdisasm")):
        if c and os.access(c, os.X_OK):
            return c
    return None


def disassemble(cubin):
    nvdisasm = find_nvdisasm()
    if nvdisasm is None:
        sys.exit("sass_loops: no nvdisasm (set NVDISASM, or run scripts/setup.sh)")
    return subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout


def kernels(text):
    """(name, instructions, {label: index}) for each function of a listing."""
    out, name, seq, labels = [], None, [], {}
    for line in text.splitlines():
        m = FUNC.match(line)
        if m:
            if name is not None:
                out.append((name, seq, labels))
            name, seq, labels = m.group(1), [], {}
            continue
        if name is None:
            continue
        m = LABEL.match(line)
        if m:
            labels[m.group(1)] = len(seq)
            continue
        m = INSTR.match(line)
        if m:
            seq.append(m.group(2))
    if name is not None:
        out.append((name, seq, labels))
    return out


def opcode(ins):
    return re.sub(r"^@!?U?P[T0-6]\s+", "", ins).split()[0].split(".")[0]


def trip(seq, labels, head, tail):
    """The instructions one trip of the loop [head, tail] issues along its fall-through path."""
    path, i, steps = [], head, 0
    while head <= i <= tail and steps < 100000:
        steps += 1
        ins = seq[i]
        path.append(ins)
        m = BRANCH.match(ins)
        if m and m.group(3) in labels:
            target = labels[m.group(3)]
            if i == tail:
                break
            if m.group(1) is None and target > i:  # over the other arm
                i = target
                continue
        i += 1
    return path


def loops(seq, labels, min_hgmma):
    """The innermost loops with enough HGMMA: of back-edges whose bodies share HGMMAs (an outer
    loop, or one that enters the inner one's body part way), the shortest body. A back-edge
    whose body holds an EXIT is no loop of the kernel's work but the return from a retry stub
    (an mbarrier's wait, placed after the kernel's code) and is left out."""
    found = []
    for i, ins in enumerate(seq):
        m = BRANCH.match(ins)
        if not m or m.group(3) not in labels or labels[m.group(3)] >= i:
            continue
        head = labels[m.group(3)]
        hgmma = {j for j in range(head, i + 1) if "HGMMA" in seq[j]}
        if any(opcode(x) == "EXIT" for x in seq[head:i + 1]):
            continue
        if len(hgmma) >= min_hgmma:
            found.append((i - head, head, i, hgmma))
    kept = []
    for _, head, tail, hgmma in sorted(found):
        if not any(hgmma & other for _, _, other in kept):
            kept.append((head, tail, hgmma))
    return sorted((h, t) for h, t, _ in kept)


def summarise(path):
    ops = collections.Counter(opcode(x) for x in path)
    flops = sum(2 * int(a) * int(b) * int(c) for x in path for a, b, c in HGMMA.findall(x))
    groups = collections.OrderedDict((g, 0) for g, _ in GROUPS)
    by_group = collections.defaultdict(dict)
    for op, n in ops.items():
        if op == "HGMMA":
            continue
        for g, test in GROUPS:
            if test(op):
                groups[g] += n
                by_group[g][op] = n
                break
    lead = next((i for i, x in enumerate(path) if opcode(x) == "HGMMA"), len(path))
    return {"instructions": len(path), "hgmma": ops.get("HGMMA", 0), "lead": lead, "mflop": flops / 1e6,
            "per_mflop": len(path) / (flops / 1e6) if flops else None, "groups": dict(groups),
            "ops": {g: dict(sorted(d.items(), key=lambda kv: -kv[1])) for g, d in by_group.items()}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="SASS listings or cubins (a spec with --variant)")
    ap.add_argument("--flashtune", help="the flashtune binary, to compile --variant of the spec given")
    ap.add_argument("--variant", action="append", default=[], help="a variant of the spec (repeatable)")
    ap.add_argument("--min-hgmma", type=int, default=8, help="HGMMA a loop's body must hold (8)")
    ap.add_argument("--json", help="write the counts here too")
    args = ap.parse_args()

    sources = []  # (label, text)
    if args.variant:
        if not args.flashtune or len(args.files) != 1:
            sys.exit("sass_loops: --variant takes --flashtune and one spec")
        with tempfile.TemporaryDirectory(prefix="sass_loops.") as tmp:
            for v in args.variant:
                cubin = os.path.join(tmp, "v%d.cubin" % len(sources))
                subprocess.run([args.flashtune, "gen", args.files[0], "--variant", v, "--cubin", cubin],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                sources.append((v, disassemble(cubin)))
    else:
        for f in args.files:
            with open(f, "rb") as fh:
                head = fh.read(4)
            sources.append((f, disassemble(f) if head == b"\x7fELF" else open(f).read()))
    if not sources:
        ap.error("nothing to read")

    report = []
    for label, text in sources:
        for name, seq, labels in kernels(text):
            for head, tail in loops(seq, labels, args.min_hgmma):
                s = summarise(trip(seq, labels, head, tail))
                s.update({"source": label, "kernel": name, "loop": [head, tail]})
                report.append(s)
                print("%s :: %s" % (label, name[:90]))
                print("  loop at %d..%d: %d instructions a trip, %d HGMMA (%.2f MFLOP a warpgroup), %s a MFLOP,"
                      " %d before the first HGMMA"
                      % (head, tail, s["instructions"], s["hgmma"], s["mflop"],
                         "%.1f" % s["per_mflop"] if s["per_mflop"] else "-", s["lead"]))
                for g, n in s["groups"].items():
                    if n:
                        detail = ", ".join("%s %d" % kv for kv in s["ops"][g].items())
                        print("    %-8s %4d  %s" % (g, n, detail))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)
    if not report:
        print("sass_loops: no loop with %d or more HGMMA found" % args.min_hgmma)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
