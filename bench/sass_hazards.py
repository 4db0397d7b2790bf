#!/usr/bin/env python3
"""Registers of in-flight wgmma groups touched before the wait that retires them, in SASS.

An HGMMA reads its A operand (when it comes from registers) and reads and writes its
accumulators asynchronously: until a `WARPGROUP.DEPBAR.LE gsb0, N` leaves at most N groups in
flight, no other instruction may touch those registers. The compiler is told so by the
templates' fences (fence_regs); this scan checks what came out. It walks a listing in text order,
holds each committed group's registers (the accumulators of every HGMMA in it, and the four A
registers of each that takes A from registers) from the HGMMA to the wait that retires the group,
and reports every other instruction naming one of them. Branches are not followed: the text order
is the order ptxas laid the code out in, which for these kernels' loops is the order they run.

    python3 bench/sass_hazards.py KERNEL.cubin [...]     (cuobjdump: $CUOBJDUMP, next to nvcc, or PATH)
    python3 bench/sass_hazards.py --listing FILE [...]   (cuobjdump -sass output)
    python3 bench/sass_hazards.py --selftest

Exit status 0 when no hazard is found, 1 when one is, 2 on a usage or tool error.
"""
import os
import re
import shutil
import subprocess
import sys

HGMMA = re.compile(r"HGMMA\.64x(\d+)x\d+\S*\s+R(\d+),\s*(?:R(\d+))?")
DEPBAR = re.compile(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x([0-9a-f]+)")
REG = re.compile(r"\bR(\d+)\b")
LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;")


def instructions(listing):
    """(address, instruction text) of each instruction of a cuobjdump -sass listing."""
    out = []
    for line in listing.splitlines():
        m = LINE.match(line)
        if m:
            out.append((int(m.group(1), 16), " ".join(m.group(2).split())))
    return out


def hazards(insts):
    """(address, instruction, registers) of every instruction touching an in-flight group's registers."""
    committed, open_group, found = [], set(), []
    for addr, text in insts:
        m = HGMMA.search(text)
        if m:
            n, acc = int(m.group(1)), int(m.group(2))
            open_group |= set(range(acc, acc + n // 2))  # m64nNk: N/2 fp32 accumulators a thread
            if m.group(3):
                open_group |= set(range(int(m.group(3)), int(m.group(3)) + 4))
            if "gsb0" in text:  # the group's last HGMMA commits it
                committed.append(open_group)
                open_group = set()
            continue
        m = DEPBAR.search(text)
        if m:
            left = int(m.group(1), 16)
            committed = committed[len(committed) - left:] if left > 0 else []
            continue
        busy = set(open_group).union(*committed) if committed else set(open_group)
        hit = {int(r) for r in REG.findall(text)} & busy
        if hit:
            found.append((addr, text, sorted(hit)))
    return found


def cuobjdump():
    tool = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not tool and shutil.which("nvcc"):
        near = os.path.join(os.path.dirname(os.path.realpath(shutil.which("nvcc"))), "cuobjdump")
        tool = near if os.path.exists(near) else None
    return tool


def selftest():
    listing = "\n".join(
        "        /*%04x*/                   %s ;" % (16 * i, t)
        for i, t in enumerate([
            "WARPGROUP.ARRIVE",
            "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT",
            "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24, gsb0",  # group 1: R24-R55
            "HGMMA.64x32x16.F32.BF16 R88, R120, gdesc[UR8].tnspB, R88, gsb0",  # group 2: R88-R103, R120-R123
            "FADD R4, R5, R6",  # clean
            "WARPGROUP.DEPBAR.LE gsb0, 0x1",  # group 1 retired
            "FMNMX R0, R24, -INF , !PT",  # clean now
            "IMAD.MOV.U32 R121, RZ, RZ, R2",  # hazard: A operand of group 2
            "WARPGROUP.DEPBAR.LE gsb0, 0x0",
            "FMUL R88, R88, R3",  # clean
        ]))
    insts = instructions(listing)
    assert len(insts) == 10, insts
    found = hazards(insts)
    assert [(a, r) for a, _, r in found] == [(0x70, [121])], found
    assert hazards(insts[:5] + insts[8:]) == []
    early = insts[:4] + [(0x45, "FADD R30, R30, R1")] + insts[4:]
    assert [r for _, _, r in hazards(early)] == [[30], [121]], hazards(early)
    print("sass_hazards selftest: ok")
    return 0


def main(argv):
    if argv == ["--selftest"]:
        return selftest()
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    listings = []
    if argv[0] == "--listing":
        if len(argv) < 2:
            print("sass_hazards: --listing takes files", file=sys.stderr)
            return 2
        for path in argv[1:]:
            with open(path) as f:
                listings.append((path, f.read()))
    else:
        tool = cuobjdump()
        if tool is None:
            print("sass_hazards: no cuobjdump ($CUOBJDUMP, next to nvcc, or on PATH)", file=sys.stderr)
            return 2
        for path in argv:
            run = subprocess.run([tool, "-sass", path], capture_output=True, text=True)
            if run.returncode != 0:
                print("sass_hazards: cuobjdump -sass %s: %s" % (path, run.stderr.strip()), file=sys.stderr)
                return 2
            listings.append((path, run.stdout))
    status = 0
    for path, listing in listings:
        insts = instructions(listing)
        found = hazards(insts)
        groups = sum("gsb0" in t and t.startswith("HGMMA") for _, t in insts)
        print("%s: %d instructions, %d wgmma groups, %d hazards" % (path, len(insts), groups, len(found)))
        for addr, text, regs in found[:20]:
            print("  /*%04x*/ %s   (R%s)" % (addr, text, ", R".join(map(str, regs))))
        status |= bool(found)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
