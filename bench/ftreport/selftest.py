"""The self-test of every module (`report.py --selftest`, the ctest report_selftest): each module's
selftest(expect, tmp) checks what it holds, without a GPU and without PyTorch; matplotlib is used
when it is there. Prints one line per check and 'N passed, N failed'; returns the exit status."""
import tempfile

from . import backward, checks, environment, measure, output, plots, render, stats

SELFTESTS = (measure.selftest, stats.selftest, checks.selftest_parse, checks.selftest_dbsummary, render.selftest,
             plots.selftest, output.selftest, environment.selftest, backward.selftest)


def run_all():
    failures, passed = [], []

    def expect(cond, what):
        print("%s %s" % ("ok  " if cond else "FAIL", what))
        (passed if cond else failures).append(what)

    with tempfile.TemporaryDirectory() as tmp:
        for selftest in SELFTESTS:
            selftest(expect, tmp)
    print("%d passed, %d failed" % (len(passed), len(failures)))
    return 1 if failures else 0
