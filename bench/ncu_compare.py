#!/usr/bin/env python3
"""Two Nsight Compute profiles of a backward (or any) call side by side: the main kernel's
metrics and its executed instructions by opcode, from the gzipped CSV pages that
bench/device_headdims_bwd.sh vsfa4 writes (PREFIX.raw.csv.gz: `ncu --page raw --csv`,
PREFIX.sass.csv.gz: `ncu --page source --csv --print-source sass`).

    python3 bench/ncu_compare.py OUT/vsfa4_flashtune_d128_s8192_c1 OUT/vsfa4_fa4_d128_s8192_c1

The main kernel is the profile's longest (raw page) and the one that executed the most
instructions (source page); where a kernel was profiled more than once, its first instance.

--spans: where each kernel's hot loop waits. The loop is the instructions executed at least
9/10 as often as its wgmmas (HGMMA); it is cut into spans at each run of wgmmas into one
accumulator and at each wait (WARPGROUP.DEPBAR, BAR.SYNC / BAR.ARV, an mbarrier try-wait), and
each span's share of the loop's warp-stall samples is printed with the instruction that opens it,
then the opcodes' shares of those samples (stall samples count where warps wait, not only where
the pipes work: compare shares, and across GPUs only shares).
"""
import argparse
import collections
import csv
import gzip
import re

METRICS = [
    ("gpu__time_duration.sum", "duration"),
    ("launch__registers_per_thread", "registers a thread"),
    ("launch__shared_mem_per_block_dynamic", "dynamic shared memory a CTA"),
    ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor pipe, % of peak"),
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue slots busy, %"),
    ("smsp__inst_executed.sum", "warp instructions executed"),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "shared-memory wavefronts"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "shared-memory bank conflicts"),
    # the conflicts of loads and of stores apart, and the wavefronts the instructions' own addresses
    # need (from the source page; the counted wavefronts above minus these are the excess, which
    # the per-instruction N-way figure does not show: it is the instructions' own, ideal count)
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "... of loads"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "... of stores"),
    ("memory_l1_wavefronts_shared_ideal", "shared-memory wavefronts, ideal"),
    ("l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/shared throughput, %"),
    ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 throughput, %"),
    ("lts__t_sector_hit_rate.pct", "L2 hit rate, %"),
    ("sm__cycles_active.avg", "SM cycles active"),
]


def main_raw(path):
    rows = list(csv.reader(gzip.open(path, "rt")))
    if len(rows) < 3:
        raise SystemExit("ncu_compare: %s has no kernel rows" % path)
    hdr, units = rows[0], rows[1]
    best = max(rows[2:], key=lambda r: float(r[hdr.index("gpu__time_duration.sum")].replace(",", "") or 0))
    return {h: (v, u) for h, v, u in zip(hdr, best, units)}


def main_sass(path):
    sections, header = [], None
    for line in gzip.open(path, "rt"):
        if line.startswith('"Kernel Name"'):
            sections.append([line.split(",")[1].strip().strip('"'), []])
            header = None
            continue
        r = next(csv.reader([line]))
        if header is None:
            header = r
            continue
        sections[-1][1].append(dict(zip(header, r)))
    seen, firsts = set(), []
    for name, rows in sections:
        if name not in seen:
            seen.add(name)
            firsts.append(rows)
    rows = max(firsts, key=lambda rs: sum(count(d) for d in rs))
    mix = collections.Counter()
    for d in rows:
        mix[opcode(d)] += count(d)
    return mix, rows


def count(d, key="Instructions Executed"):
    return int((d.get(key) or "0").replace(",", "") or 0)


def opcode(d):
    return re.sub(r"^@!?U?P\w+\s+", "", d["Source"].strip()).split(" ")[0].split(".")[0]


WAITS = ("WARPGROUP.DEPBAR", "BAR.SYNC", "BAR.ARV", "SYNCS.PHASECHK")


def loop_spans(rows):
    """The hot loop's spans [(opening instruction, samples)], their total and the opcodes' samples."""
    samples = "Warp Stall Sampling (All Samples)"
    hgmma = [count(d) for d in rows if opcode(d) == "HGMMA"]
    if not hgmma:
        return [], 0, collections.Counter()
    floor = 0.9 * max(hgmma)
    spans, ops, accum = [], collections.Counter(), None
    for d in rows:
        if count(d) < floor:
            continue
        src = re.sub(r"^@!?U?P\w+\s+", "", d["Source"].strip())
        m = re.match(r"HGMMA\.(\S+) (R\d+)", src)
        key = ("HGMMA " + m.group(1) + " " + m.group(2)) if m else None
        wait = not m and src.startswith(WAITS)
        if (m and key != accum) or wait or not spans:
            spans.append([key or " ".join(src.split()[:2]).rstrip(","), 0])
        if m or wait:
            accum = key
        spans[-1][1] += count(d, samples)
        ops[opcode(d)] += count(d, samples)
    return spans, sum(n for _, n in spans), ops


def number(v):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="first profile's prefix")
    ap.add_argument("b", help="second profile's prefix")
    ap.add_argument("--ops", type=int, default=24, help="opcodes listed (the most executed)")
    ap.add_argument("--spans", action="store_true", help="also each hot loop's spans and stall samples")
    x = ap.parse_args()
    ra, rb = main_raw(x.a + ".raw.csv.gz"), main_raw(x.b + ".raw.csv.gz")
    print("| metric | A | B | B / A |\n|---|---|---|---|")
    for key, label in METRICS:
        va, vb = ra.get(key, ("?", ""))[0], rb.get(key, ("?", ""))[0]
        na, nb = number(va), number(vb)
        ratio = "%.2f" % (nb / na) if na and nb is not None else ""
        print("| %s (%s) | %s | %s | %s |" % (label, ra.get(key, ("", ""))[1], va, vb, ratio))
    (ma, rows_a), (mb, rows_b) = main_sass(x.a + ".sass.csv.gz"), main_sass(x.b + ".sass.csv.gz")
    ta, tb = sum(ma.values()), sum(mb.values())
    print("\n| opcode | A | B | A − B | A, % of all | B, % of all |\n|---|---|---|---|---|---|")
    for op in sorted(set(ma) | set(mb), key=lambda o: -(ma[o] + mb[o]))[:x.ops]:
        print("| %s | %d | %d | %d | %.1f | %.1f |" % (op, ma[op], mb[op], ma[op] - mb[op], 100 * ma[op] / ta,
                                                    100 * mb[op] / tb))
    print("| all | %d | %d | %d | | |" % (ta, tb, ta - tb))
    if not x.spans:
        return
    loops = [loop_spans(rows_a), loop_spans(rows_b)]
    for name, (spans, total, _) in zip("AB", loops):
        print("\n%s's hot loop, %d stall samples\n\n| span opened by | samples, %% |\n|---|---|" % (name, total))
        for label, n in spans:
            print("| %s | %.1f |" % (label, 100 * n / max(total, 1)))
    (_, sa, oa), (_, sb, ob) = loops
    print("\n| opcode | A, % of the loop's samples | B |\n|---|---|---|")
    for op in sorted(set(oa) | set(ob), key=lambda o: -(oa[o] / max(sa, 1) + ob[o] / max(sb, 1)))[:x.ops]:
        print("| %s | %.1f | %.1f |" % (op, 100 * oa[op] / max(sa, 1), 100 * ob[op] / max(sb, 1)))


if __name__ == "__main__":
    main()
