#!/usr/bin/env python3
"""Registers of in-flight wgmma groups touched before the wait that retires them, in SASS.

An HGMMA reads its A operand (when it comes from registers) and reads and writes its
accumulators asynchronously: until a `WARPGROUP.DEPBAR.LE gsb0, N` leaves at most N groups in
flight, no other instruction may touch those registers. The compiler is told so by the
templates' fences (fence_regs); this scan checks what came out. It holds each committed
group's accumulators (those of every HGMMA in it) from the HGMMA to the wait that retires the
group. It reports every other instruction naming one of them, and every instruction writing a
register that an HGMMA in flight takes A from (hazards: exit status 1).
Reads of those A registers are counted, not failed: a read beside the HGMMA's own read changes
nothing (the early_dv=3 backward kernels unpack Pᵀ for dSᵀ while dV's steps run). The groups in
flight are followed along the control flow (branches and fall-through, joined where paths meet),
from the function's first instruction.

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


BRANCH = re.compile(r"^(@!?U?P\w+\s+)?BRA(\.\S+)?\s+(?:!?U?P\w+,\s*|UR\d+,\s*)?0x([0-9a-f]+)")
END = re.compile(r"^(EXIT|RET)\b")
MAX_GROUPS = 8  # deeper stacks at a join are folded into their oldest entry


def successors(insts):
    """Each instruction's successors' indices: the branch target, and the next instruction
    unless the branch or exit is unconditional."""
    index = {addr: k for k, (addr, _) in enumerate(insts)}
    out = []
    for k, (_, text) in enumerate(insts):
        nxt = [k + 1] if k + 1 < len(insts) else []
        m = BRANCH.match(text)
        if m:
            target = index.get(int(m.group(3), 16))
            # (BRA.DIV: the divergent warps' path; the others go on)
            conditional = m.group(1) is not None or re.search(r"BRA(\.\S+)?\s+(!?U?P\w+|UR\d+),", text)
            out.append(([target] if target is not None else []) + (nxt if conditional else []))
        elif END.match(text) and not text.startswith("@"):
            out.append([])
        else:
            out.append(nxt)
    return out


def step(state, text, operand):
    """The in-flight groups after one instruction: (committed groups oldest first, open group)."""
    committed, open_group = state
    m = HGMMA.search(text)
    if m:
        n, acc = int(m.group(1)), int(m.group(2))
        regs = set(range(acc, acc + n // 2)) if operand == "accumulators" else (
            set(range(int(m.group(3)), int(m.group(3)) + 4)) if m.group(3) else set())  # m64nNk: N/2 accumulators
        open_group = open_group | frozenset(regs)
        if "gsb0" in text:  # the group's last HGMMA commits it
            return committed + (open_group,), frozenset()
        return committed, open_group
    m = DEPBAR.search(text)
    if m:
        left = int(m.group(1), 16)
        return (committed[len(committed) - left:] if left > 0 else ()), open_group
    return state


def join(a, b):
    """Both paths' in-flight groups, aligned from the newest."""
    ca, cb = a[0], b[0]
    n = max(len(ca), len(cb))
    ca, cb = (frozenset(),) * (n - len(ca)) + ca, (frozenset(),) * (n - len(cb)) + cb
    groups = tuple(x | y for x, y in zip(ca, cb))
    if len(groups) > MAX_GROUPS:
        groups = (frozenset().union(*groups[:len(groups) - MAX_GROUPS + 1]),) + groups[len(groups) - MAX_GROUPS + 1:]
    return groups, a[1] | b[1]


def hazards(insts, operand="accumulators"):
    """(address, instruction, registers) of every instruction that some path reaches with an
    in-flight group's accumulators (operand "accumulators") or the registers its HGMMAs take A
    from ("a") among the registers it names."""
    if not insts:
        return []
    succ = successors(insts)
    before = [None] * len(insts)
    before[0] = ((), frozenset())
    work = [0]
    while work:
        k = work.pop()
        after = step(before[k], insts[k][1], operand)
        for j in succ[k]:
            merged = after if before[j] is None else join(before[j], after)
            if merged != before[j]:
                before[j] = merged
                work.append(j)
    found = []
    for k, (addr, text) in enumerate(insts):
        if before[k] is None or HGMMA.search(text) or DEPBAR.search(text):
            continue
        committed, open_group = before[k]
        busy = open_group.union(*committed)
        hit = {int(r) for r in REG.findall(text)} & busy
        if hit:
            found.append((addr, text, sorted(hit)))
    return found


NO_DEST = re.compile(r"^(ST|STS|STG|STL|STSM|RED|SYNCS|BAR|BRA|WARPSYNC|UTMA|UBLKCP|MEMBAR|FENCE)\b")


def writes(text, regs):
    """Whether the instruction's destination (its first operand, for an instruction that has
    one) is among regs."""
    body = re.sub(r"^@!?U?P\w+\s+", "", text)
    parts = body.split(None, 1)
    if len(parts) < 2 or NO_DEST.match(parts[0]):
        return False
    m = re.match(r"R(\d+)\b", parts[1])
    return m is not None and int(m.group(1)) in regs


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
    assert writes(found[0][1], found[0][2]) and not writes("FADD R4, R121, R6", [121])
    assert not writes("STS [R121], R2", [121]) and not writes("@P0 BRA 0x40", [121])
    early = insts[:4] + [(0x45, "FADD R30, R30, R1")] + insts[4:]
    assert [r for _, _, r in hazards(early)] == [[30]], hazards(early)
    assert [r for _, _, r in hazards(early, "a")] == [[121]], hazards(early, "a")
    # paths, not the text's order: code after an unconditional branch is reached from elsewhere
    paths = functions("\n".join(
        "        /*%04x*/                   %s ;" % (16 * i, t)
        for i, t in enumerate([
            "@P0 BRA 0x40",
            "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0",
            "BRA 0x60",
            "FADD R30, R30, R1",  # reached only from 0x00's branch: no group in flight there
            "FMUL R31, R31, R2",
            "BRA 0x80",
            "FMUL R32, R2, R3",  # reached from 0x20 with the group in flight: a hazard
            "WARPGROUP.DEPBAR.LE gsb0, 0x0",
            "FADD R33, R33, R1",  # both paths join here, the group retired on the one that had it
            "BRA.DIV UR4, 0xc0",
            "EXIT",
            "FADD R34, R24, R1",  # the divergent path: no group in flight
            "EXIT",
        ])))[0][1]
    assert [(a, r) for a, _, r in hazards(paths)] == [(0x60, [32])], hazards(paths)
    assert successors(paths)[9] == [12, 10] and successors(paths)[10] == []
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
            a_regs = hazards(insts, "a")
            a_writes = [h for h in a_regs if writes(h[1], h[2])]
            found = hazards(insts) + a_writes
            groups = sum("gsb0" in t and t.startswith("HGMMA") for _, t in insts)
            print("%s %s: %d instructions, %d wgmma groups, %d hazards (%d reads of A registers)"
                  % (path, name, len(insts), groups, len(found), len(a_regs) - len(a_writes)))
            for addr, text, regs in found[:20]:
                print("  /*%04x*/ %s   (R%s)" % (addr, text, ", R".join(map(str, regs))))
            status |= bool(found)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
