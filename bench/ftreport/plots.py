"""The plots: TFLOP/s against seqlen, one figure per dtype (tflops_<dtype>.png), one panel per
head dim and causality, one line per system with its quartile band. Needs matplotlib."""
import os

from .render import label, seq_label, systems_of, tflops_of


def make_plots(report, out_dir):
    """TFLOP/s against seqlen, one figure per dtype, one panel per (head dim, causal), one line per
    system (the band: TFLOP/s at the quartiles of the time). Returns the files written, or []
    when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    rows = report.get("rows", [])
    systems = systems_of(report)
    written = []
    for dtype in sorted({r["dtype"] for r in rows}, key=lambda x: (x != "f16", x)):
        rs = [r for r in rows if r["dtype"] == dtype]
        dims = sorted({r["d"] for r in rs})
        causals = sorted({r["causal"] for r in rs})
        fig, axes = plt.subplots(len(dims), len(causals), figsize=(5.5 * len(causals), 3.6 * len(dims)),
                                 squeeze=False, sharex=True)
        for i, d in enumerate(dims):
            for j, c in enumerate(causals):
                ax = axes[i][j]
                pts = sorted((r for r in rs if r["d"] == d and r["causal"] == c), key=lambda r: r["seqlen"])
                for s in systems:
                    xs, ys, lo, hi = [], [], [], []
                    for r in pts:
                        t = tflops_of(r, s)
                        if t is None:
                            continue
                        v = r["systems"][s]
                        xs.append(r["seqlen"])
                        ys.append(t)
                        lo.append(r["flops"] / v["q3_ms"] / 1e9 if v.get("q3_ms") else t)
                        hi.append(r["flops"] / v["q1_ms"] / 1e9 if v.get("q1_ms") else t)
                    if not xs:
                        continue
                    style = {"linewidth": 2.4, "zorder": 5} if s == "flashtune" else {"linewidth": 1.4}
                    line, = ax.plot(xs, ys, marker="o", markersize=4, label=label(report, s), **style)
                    ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
                ax.set_xscale("log", base=2)
                seqs = sorted({r["seqlen"] for r in pts})
                if seqs:
                    ax.set_xticks(seqs)
                    ax.set_xticklabels([seq_label(x) for x in seqs])
                    ax.minorticks_off()
                ax.set_ylim(bottom=0)
                ax.grid(True, alpha=0.3)
                ax.set_title("%s, d=%d, %s" % (dtype, d, "causal" if c else "non-causal"), fontsize=10)
                if j == 0:
                    ax.set_ylabel("TFLOP/s")
                if i == len(dims) - 1:
                    ax.set_xlabel("seqlen (batch = %d / seqlen)" % report.get("config", {}).get("tokens", 16384))
        handles, labels_ = [], []
        for row_axes in axes:
            for ax in row_axes:
                for h, l in zip(*ax.get_legend_handles_labels()):
                    if l not in labels_:
                        handles.append(h)
                        labels_.append(l)
        height = fig.get_figheight()
        gpu = report.get("env", {}).get("gpu", {}).get("name", "")
        fig.suptitle("Forward attention, %s, %s (band: quartiles)" % (dtype, gpu), y=1 - 0.1 / height, fontsize=11)
        if handles:
            fig.legend(handles, labels_, loc="upper center", ncol=len(handles), frameon=False,
                       bbox_to_anchor=(0.5, 1 - 0.38 / height))
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / height))
        path = os.path.join(out_dir, "tflops_%s.png" % dtype)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def selftest(expect, tmp):
    from .testdata import have_matplotlib, synthetic_report

    if not have_matplotlib():
        print("skip plots: no matplotlib")
        expect(make_plots(synthetic_report(), tmp) == [], "plots: none without matplotlib")
        return
    out = os.path.join(tmp, "plots")
    os.makedirs(out)
    files = make_plots(synthetic_report(), out)
    pngs = sorted(f for f in os.listdir(out) if f.endswith(".png"))
    expect(pngs == ["tflops_bf16.png", "tflops_f16.png"] and sorted(map(os.path.basename, files)) == pngs,
           "plots: one figure per dtype")
    expect(all(open(os.path.join(out, p), "rb").read(8) == b"\x89PNG\r\n\x1a\n" for p in pngs), "plots are PNG")
