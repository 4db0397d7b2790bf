#!/usr/bin/env python3
"""Registers of in-flight wgmma groups touched before the wait that retires them, in SASS.

An HGMMA reads its A operand (when it comes from registers) and reads and writes its
accumulators asynchronously: until a `WARPGROUP.DEPBAR.LE gsb0, N` leaves at most N groups in
flight, no other instruction may touch those registers. The compiler is told so by the
templates' fences (fence_regs); this scan checks what came out. It walks a listing in text
order, holds each committed group's accumulators (those of every HGMMA in it) from the HGMMA to
the wait that retires the group, and reports every other instruction naming one of them (a
hazard: exit status 1). Registers an HGMMA takes A from are counted, not failed: ptxas reuses
them right after the issue (in the early_dv=3 backward kernels, for the next exponentials), which
its scoreboards order, and the listing does not show those. Branches are not followed: the text
order is the order ptxas laid the code out in, which for these kernels' loops is the order they run.

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
FUNCTION = re.compile(r"^\s*Function : (\S+)")


def functions(listing):
    """(name, [(address, instruction text)]) of each function of a cuobjdump -sass listing (a
    group in flight never crosses from one function into the next)."""
    out = []
    for line in listing.splitlines():
        m = FUNCTION.match(line)
        if m:
            out.append((m.group(1), []))
            continue
        m = LINE.match(line)
        if m:
            if not out:
                out.append(("", []))
            out[-1][1].append((int(m.group(1), 16), " ".join(m.group(2).split())))
    return out


def hazards(insts, operand="accumulators"):
    """(address, instruction, registers) of every instruction touching an in-flight group's
    accumulators (operand "accumulators") or the registers its HGMMAs take A from ("a")."""
    committed, open_group, found = [], set(), []
    for addr, text in insts:
        m = HGMMA.search(text)
        if m:
            n, acc = int(m.group(1)), int(m.group(2))
            if operand == "accumulators":
                open_group |= set(range(acc, acc + n // 2))  # m64nNk: N/2 fp32 accumulators a thread
            elif m.group(3):
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
    fns = functions(listing)
    assert len(fns) == 1 and len(fns[0][1]) == 10, fns
    insts = fns[0][1]
    assert hazards(insts) == []
    found = hazards(insts, "a")
    assert [(a, r) for a, _, r in found] == [(0x70, [121])], found
    early = insts[:4] + [(0x45, "FADD R30, R30, R1")] + insts[4:]
    assert [r for _, _, r in hazards(early)] == [[30]], hazards(early)
    assert [r for _, _, r in hazards(early, "a")] == [[121]], hazards(early, "a")
    # a group left in flight at one function's end is not the next function's
    two = "\t\tFunction : a\n" + "\n".join(listing.splitlines()[:4]) + "\n\t\tFunction : b\n" + listing.splitlines()[4]
    assert [len(i) for _, i in functions(two)] == [4, 1]
    assert [hazards(i) for _, i in functions(two)] == [[], []]
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
        for name, insts in functions(listing):
            if not any(t.startswith("HGMMA") for _, t in insts):
                continue
            found, a_regs = hazards(insts), hazards(insts, "a")
            groups = sum("gsb0" in t and t.startswith("HGMMA") for _, t in insts)
            print("%s %s: %d instructions, %d wgmma groups, %d hazards (%d touches of A registers)"
                  % (path, name, len(insts), groups, len(found), len(a_regs)))
            for addr, text, regs in found[:20]:
                print("  /*%04x*/ %s   (R%s)" % (addr, text, ", R".join(map(str, regs))))
            status |= bool(found)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
