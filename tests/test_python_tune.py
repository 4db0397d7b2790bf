#!/usr/bin/env python3
"""flashtune.tune from Python, without a GPU or PyTorch: the command ($FLASHTUNE_CMD) with the
stand-in worker ($FLASHTUNE_WORKER) tunes a filtered space into a database of its own, the
summary comes back as a dict and the database has the winners; a failing tune raises
FlashtuneError with the command's message; a command that is not there says how to name it."""
import os
import sqlite3
import sys
import tempfile

if not os.environ.get("FLASHTUNE_TEST_INSTALLED"):  # else the installed package (tests/pip_wheel.sh)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashtune  # noqa: E402
from pycheck import Checks  # noqa: E402

checks = Checks("python tune")
report = checks.report


only = "d=64,bm=64,bn=64,warps=4,dtype=f16"  # as tune_fake.sh: 20 variants, 12 buckets
with tempfile.TemporaryDirectory() as tmp:
    db = os.path.join(tmp, "t.db")
    s = flashtune.tune("specs/flash_fwd.lua", database=db, only=only, jobs=2, search="exhaustive")
    report(s.get("kind") == "summary" and s.get("device") == "Fake GPU" and s.get("buckets") == 12 and
           s.get("winners") == 12 and s.get("database") == db, "tune: the summary (%s)" % {
               k: s.get(k) for k in ("kind", "device", "buckets", "winners")})
    n = sqlite3.connect(db).execute("select count(*) from results").fetchone()[0]
    report(n == s.get("measured"), "tune: the database holds every measurement (%d)" % n)
    again = flashtune.tune(["specs/flash_fwd.lua"], database=db, only=only, jobs=2, search="exhaustive")
    report(again.get("measured") == 0 and again.get("winners") == 12, "tune again: nothing measured twice")
    ranked = flashtune.tune("specs/flash_fwd.lua", database=os.path.join(tmp, "r.db"), only=only, jobs=2)
    report(ranked.get("search") == "ranked" and ranked.get("winners") == 12 and
           0 < ranked.get("screened", 0) < s.get("measured"), "tune(): the ranked search by default (%s)" % {
               k: ranked.get(k) for k in ("search", "screened", "winners")})
    halved = flashtune.tune("specs/flash_fwd.lua", database=os.path.join(tmp, "h.db"), only=only, jobs=2,
                            search="halving")
    report(halved.get("search") == "halving" and halved.get("screened") == 120 and halved.get("kept") == 48 and
           halved.get("winners") == 12, "tune(search='halving'): %s" % {
               k: halved.get(k) for k in ("search", "screened", "kept", "winners")})
    # With made-up noise of 5 % some buckets' leaders tie and race on a second shape; one_shape
    # turns that off.
    os.environ["FAKE_JITTER"] = "0.05"
    two = flashtune.tune("specs/flash_fwd.lua", database=os.path.join(tmp, "n.db"), only=only, jobs=2,
                         search="exhaustive")
    one = flashtune.tune("specs/flash_fwd.lua", database=os.path.join(tmp, "o.db"), only=only, jobs=2, one_shape=True,
                         search="exhaustive")
    del os.environ["FAKE_JITTER"]
    report(two.get("ties", 0) > 0 and one.get("winners") == 12 and one.get("ties") == 0 and one.get("decided") == 0,
           "tune(one_shape=True): %s, without it %s" % ({k: one.get(k) for k in ("winners", "ties", "decided")},
                                                       {k: two.get(k) for k in ("winners", "ties", "decided")}))
    try:
        flashtune.tune("specs/flash_fwd.lua", database=db, only="nonsense=1")
        report(False, "a bad filter: no error")
    except flashtune.FlashtuneError as e:
        report("unknown parameter 'nonsense'" in str(e) and "exit status 2" in str(e), "a bad filter: %s" % e)
    # Without a GPU (and no stand-in worker): the compile-only plan's summary, said to be one.
    try:
        import ctypes
        ctypes.CDLL("libcuda.so.1")
        print("no GPU: compile-only summary: skipped (a CUDA driver is here)")
    except OSError:
        worker = os.environ.pop("FLASHTUNE_WORKER", None)
        plan = flashtune.tune("specs/flash_fwd.lua", database=db, only=only + ",stages=1", jobs=2)
        report(plan.get("compile_only") is True and "libcuda" in (plan.get("no_gpu") or "") and
               plan.get("kind") == "summary" and plan.get("compiled") == 4,
               "no GPU: the compile-only plan's summary (%s)" % {k: plan.get(k) for k in ("compile_only", "compiled")})
        if worker is not None:
            os.environ["FLASHTUNE_WORKER"] = worker
    os.environ["FLASHTUNE_CMD"] = os.path.join(tmp, "no-such-flashtune")
    try:
        flashtune.tune(database=db)
        report(False, "a missing command: no error")
    except flashtune.FlashtuneError as e:
        report("set FLASHTUNE_CMD" in str(e), "a missing command: %s" % e)
checks.finish()
