"""The environment a run measures in, for report.json and the head of report.md: the date, the
host, Python, PyTorch, CUDA, cuDNN, Triton, the GPU and its clocks (nvidia-smi), the flashtune
library, the checkout's commit and the sha256 of its kernel templates."""
import datetime
import hashlib
import os
import platform
import subprocess

from . import REPO


def templates_sha256():
    """sha256 of each kernel template of the checkout, by file name."""
    out = {}
    tdir = os.path.join(REPO, "templates")
    for name in sorted(os.listdir(tdir)) if os.path.isdir(tdir) else []:
        if name.endswith(".cuh"):
            with open(os.path.join(tdir, name), "rb") as f:
                out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def environment(torch, args):
    env = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
           "python": platform.python_version(), "platform": platform.platform(), "host": platform.node(),
           "torch": torch.__version__, "torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    for mod in ("triton", "numpy", "matplotlib"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - any import failure means "not there"
            env[mod] = None
    p = torch.cuda.get_device_properties(args.device)
    env["gpu"] = {"name": p.name, "cc": "%d.%d" % (p.major, p.minor), "sms": p.multi_processor_count,
                  "memory_bytes": p.total_memory, "l2_bytes": getattr(p, "L2_cache_size", None)}
    # nvidia-smi numbers the GPUs of the host; CUDA_VISIBLE_DEVICES may renumber them for CUDA.
    visible = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    smi_index = visible[args.device] if args.device < len(visible) and visible[args.device].isdigit() else str(
        args.device)
    env["gpu"]["index"] = int(smi_index) if smi_index.isdigit() else smi_index
    try:
        q = subprocess.run(["nvidia-smi", "-i", smi_index, "--query-gpu=driver_version,clocks.sm,clocks.max.sm,"
                            "clocks.mem,power.limit,temperature.gpu,persistence_mode", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        f = [x.strip() for x in q.stdout.strip().split(",")]
        if q.returncode == 0 and len(f) >= 7:
            env["driver"] = f[0]
            env["nvidia_smi"] = dict(zip(["driver", "clock_sm", "clock_sm_max", "clock_mem", "power_limit",
                                          "temperature", "persistence"], f))
    except (OSError, subprocess.SubprocessError):
        env["driver"] = None
    try:
        import flashtune
        env["flashtune_lib"] = flashtune.library_path()
        env["flashtune_version"] = flashtune.version()
    except Exception as e:  # noqa: BLE001
        env["flashtune_version"] = "unknown (%s)" % e
    try:
        g = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        env["git_commit"] = g.stdout.strip() if g.returncode == 0 else None
        g = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True, timeout=10)
        env["git_modified"] = g.stdout.split("\n")[:-1] if g.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        env["git_commit"] = None
    # The kernels that ran come from these files (a checkout may not have the commit's history).
    env["templates_sha256"] = templates_sha256()
    return env


def selftest(expect, tmp):
    sums = templates_sha256()
    expect(len(sums.get("flash_fwd_sm90.cuh", "")) == 64 and len(sums.get("flash_fwd_sm80.cuh", "")) == 64,
           "the templates' sha256 for the environment")
