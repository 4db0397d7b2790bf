"""What flashtune prints, parsed: the closing summary of `flashtune tune` (and
bench/device_tune.sh's line around it), its durations, the FLASHTUNE_DEBUG lines of the runtime's
kernel choice and the bucket key they name; and bench/overhead.c's JSON, read verbatim."""
import json
import re


def bucket_key(dtype, d, causal, batch, heads, seqlen_q, seqlen_k, heads_kv=None):
    """flashtune's dispatch key of a forward call, from the library (flashtune.key: the one
    formula), as its FLASHTUNE_DEBUG line prints it: the operation, then the key's canonical text
    ('fwd {"dtype":"f16","d":64,"causal":1,"group":1,"sq":512,"seqlen":512,"bh":1024}')."""
    from flashtune import key

    k = key(dtype, batch, heads, seqlen_q, seqlen_k, d, causal, heads_kv)
    return "fwd " + json.dumps(k, separators=(",", ":"))


# runtime/context.c: "flashtune: <op> <key text>: <how the kernel was chosen>"
DISPATCH_RE = re.compile(r"^flashtune: ([a-z]+ \{[^{}]*\}): (.*)$")


def parse_dispatch(text):
    """The FLASHTUNE_DEBUG lines in text: {bucket: how the kernel was chosen}."""
    out = {}
    for line in text.splitlines():
        m = DISPATCH_RE.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def parse_duration(text):
    """flashtune's durations (cli_format_duration): '12.3s', '4m54s', '1h02m' -> seconds."""
    text = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)s", text)
    if m:
        return float(m.group(1))
    m = re.fullmatch(r"(\d+)m(\d+)s", text)
    if m:
        return 60.0 * int(m.group(1)) + int(m.group(2))
    m = re.fullmatch(r"(\d+)h(\d+)m", text)
    if m:
        return 3600.0 * int(m.group(1)) + 60.0 * int(m.group(2))
    return None


def parse_tune_log(text):
    """What `flashtune tune` printed (its closing summary), plus bench/device_tune.sh's
    'tune 1: rc=0 in N s' line when present. A log of several tunes (one per head dim, say)
    gives their sums, and "tunes" says how many there were."""
    out = {}

    def add(key, value):
        out[key] = out.get(key, 0) + value if value is not None and out.get(key, 0) is not None else None

    runs = list(re.finditer(r"^tuned (.+?): (\d+) buckets, (\d+) variants \((\d+) pruned\)", text, re.M))
    if runs:
        out["device"] = runs[0].group(1)
        out["tunes"] = len(runs)
    for m in runs:
        add("buckets", int(m.group(2)))
        add("variants", int(m.group(3)))
        add("pruned", int(m.group(4)))
    for m in re.finditer(r"^measured (\d+), already in the database (\d+): (.*)$", text, re.M):
        add("measured", int(m.group(1)))
        add("already_in_database", int(m.group(2)))
        status = out.setdefault("by_status", {})
        for n, k in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", m.group(3)):
            status[k.strip()] = status.get(k.strip(), 0) + int(n)
    for m in re.finditer(r"^winners: (\d+) buckets \((\d+) (?:near-ties re-measured|races of the leaders)[^)]*\); worker restarts: "
                         r"(\d+)", text, re.M):
        add("winners", int(m.group(1)))
        add("near_ties", int(m.group(2)))
        add("worker_restarts", int(m.group(3)))
    for m in re.finditer(r"^time: (\S+) wall; compiling (\S+), verifying (\S+), timing (\S+)", text, re.M):
        for key, g in zip(("wall_s", "compile_s", "verify_s", "timing_s"), m.groups()):
            add(key, parse_duration(g))
    if "wall_s" in out:
        parts = [out["compile_s"], out["verify_s"], out["timing_s"]]
        if out["wall_s"] is not None and None not in parts:
            out["other_s"] = max(0.0, out["wall_s"] - sum(parts))
    for m in re.finditer(r"^tune: compiling (\d+) variants", text, re.M):
        add("compiled_variants", int(m.group(1)))
    m = re.search(r"^database: (\S+)", text, re.M)
    if m:
        out["database"] = m.group(1)
    m = re.search(r"^tune \d+: rc=(-?\d+) in (\d+) s", text, re.M)
    if m:
        out["script_rc"], out["script_wall_s"] = int(m.group(1)), int(m.group(2))
    if re.search(r"^flashtune tune: .*run tune again", text, re.M):
        out["interrupted"] = True
    return out


def read_overhead(path):
    """bench/overhead.c's JSON, whose fields the report includes verbatim. Raises OSError or
    ValueError when the file cannot be read or is not JSON."""
    with open(path) as f:
        return json.load(f)
