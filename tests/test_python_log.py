#!/usr/bin/env python3
"""The binding's route for the library's diagnostic lines, without a GPU or PyTorch: loading
the library installs a handler that hands each line to the "flashtune" logger (level 1 as
WARNING, else DEBUG), and with FLASHTUNE_DEBUG on installs none (the lines stay on stderr). That
the library calls it is checked on a GPU (tests/test_python.py: a kernel choice logged)."""
import logging
import os
import subprocess
import sys

if not os.environ.get("FLASHTUNE_TEST_INSTALLED"):  # else the installed package (tests/pip_wheel.sh)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashtune  # noqa: E402
from pycheck import Checks  # noqa: E402

checks = Checks("python log route")
report = checks.report


class Keep(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append((record.name, record.levelno, record.getMessage()))


os.environ.pop("FLASHTUNE_DEBUG", None)
flashtune._load()
report(flashtune._log_callback is not None, "a handler is installed when the library loads")
keep = Keep()
logger = logging.getLogger("flashtune")
logger.addHandler(keep)
logger.setLevel(logging.DEBUG)
flashtune._log_callback(None, 0, b'fwd {"d": 64}: built-in default')
flashtune._log_callback(None, 1, b"FLASHTUNE_RECORD_MISSES: gone \xff")
report(keep.records[:1] == [("flashtune", logging.DEBUG, 'fwd {"d": 64}: built-in default')], "level 0 as DEBUG")
report(len(keep.records) == 2 and keep.records[1][1] == logging.WARNING and keep.records[1][2].startswith(
    "FLASHTUNE_RECORD_MISSES: gone"), "level 1 as WARNING, bytes that are not UTF-8 replaced")
code = "import flashtune; flashtune._load(); print(flashtune._log_callback is None)"
env = dict(os.environ, FLASHTUNE_DEBUG="1")
if not os.environ.get("FLASHTUNE_TEST_INSTALLED"):
    env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
report(out.returncode == 0 and out.stdout.strip() == "True", "FLASHTUNE_DEBUG=1: no handler (%s)" %
       (out.stdout.strip() or out.stderr.strip()[-200:]))
checks.finish()
