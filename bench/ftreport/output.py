"""The outputs of a run in its directory: report.json (everything), report.md and the plots,
rewritten as the run goes; and one report merged from the parts of a run split over the GPUs of
one host (report.py --from-json A --from-json B)."""
import json
import os

from .plots import make_plots
from .render import render_markdown


def write_outputs(report, out_dir, plots=False):
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, ".report.json.tmp")
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1, default=str)
    os.replace(tmp, os.path.join(out_dir, "report.json"))
    if plots:
        files = make_plots(report, out_dir)
        report["plots"] = [os.path.basename(p) for p in files] or "matplotlib missing: no plots"
    md = render_markdown(report)
    if report.get("plots"):
        if isinstance(report["plots"], list):
            md += "\n## Plots\n\n" + "\n".join("![%s](%s)" % (p, p) for p in report["plots"]) + "\n"
        else:
            md += "\n(%s)\n" % report["plots"]
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(md)
    if plots:  # the plot list is part of the JSON too
        with open(tmp, "w") as f:
            json.dump(report, f, indent=1, default=str)
        os.replace(tmp, os.path.join(out_dir, "report.json"))


def merge_reports(parts):
    """One report from the parts of a run split over several GPUs of one host (for example one dtype
    per GPU, started together): the rows in the order given, the environment and configuration of
    the first part, and each part's GPU, date and command under "parts". The parts must time the
    same systems and must not measure the same shape twice."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    systems = first.get("config", {}).get("systems")
    merged = dict(first)
    merged["rows"], merged["dispatch"], merged["skipped_shapes"], merged["parts"] = [], {}, [], []
    seen = set()
    for i, part in enumerate(parts):
        if part.get("config", {}).get("systems") != systems:
            raise ValueError("part %d times %s, part 1 times %s" % (i + 1, part.get("config", {}).get("systems"),
                                                                    systems))
        for row in part.get("rows", []):
            key = (row["dtype"], row["d"], row["causal"], row["seqlen"], row["batch"], row["heads"])
            if key in seen:
                raise ValueError("part %d measures %s d=%d causal=%d seqlen=%d again" % (i + 1, row["dtype"],
                                 row["d"], row["causal"], row["seqlen"]))
            seen.add(key)
            merged["rows"].append(row)
        merged["dispatch"].update(part.get("dispatch", {}))
        merged["skipped_shapes"].extend(part.get("skipped_shapes", []))
        env = part.get("env", {})
        merged["parts"].append({"gpu": env.get("gpu"), "date": env.get("date"),
                                "command": part.get("config", {}).get("command")})
    return merged


def selftest(expect, tmp):
    import shutil

    from .testdata import have_matplotlib, report_with_db, synthetic_report

    rep = report_with_db(tmp)
    out = os.path.join(tmp, "out")
    write_outputs(rep, out, plots=True)
    with open(os.path.join(out, "report.json")) as f:
        back = json.load(f)
    expect(len(back["rows"]) == len(rep["rows"]) and os.path.exists(os.path.join(out, "report.md")),
           "report.json and report.md written")
    have_mpl = have_matplotlib()
    with open(os.path.join(out, "report.md")) as f:
        md = f.read()
    if have_mpl:
        expect(back.get("plots") == ["tflops_f16.png", "tflops_bf16.png"] and
               "![tflops_f16.png](tflops_f16.png)" in md, "plots: listed in report.json and shown in report.md")
    else:
        expect(back.get("plots") == "matplotlib missing: no plots" and "(matplotlib missing: no plots)" in md,
               "no plots without matplotlib, said so")
    a, b = synthetic_report(), synthetic_report()
    a["rows"] = [r for r in a["rows"] if r["dtype"] == "f16"]
    b["rows"] = [r for r in b["rows"] if r["dtype"] == "bf16"]
    a["config"]["systems"] = b["config"]["systems"] = ["flashtune", "fa2"]
    b["env"]["gpu"] = {"name": "Synthetic GPU", "index": 1}
    m = merge_reports([a, b])
    expect(len(m["rows"]) == 24 and [r["dtype"] for r in m["rows"]][11:13] == ["f16", "bf16"] and
           len(m["parts"]) == 2 and m["parts"][1]["gpu"]["index"] == 1, "merge: rows in order, parts kept")
    expect("One run split over 2 GPUs of one host" in render_markdown(m), "merge: the parts named in the text")
    expect(merge_reports([a]) is a, "merge: one part is the report itself")
    for bad, what in (([a, a], "measures f16 d=64 causal=0 seqlen=512 again"),
                      ([a, dict(b, config={"systems": ["fa2"]})], "part 2 times")):
        try:
            merge_reports(bad)
            expect(False, "merge refuses: " + what)
        except ValueError as e:
            expect(what in str(e), "merge refuses: " + what)
    if os.environ.get("REPORT_SELFTEST_KEEP"):
        keep = os.environ["REPORT_SELFTEST_KEEP"]
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(out, keep)
