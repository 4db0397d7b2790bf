"""What the Python tests that need neither a GPU nor PyTorch share: one line per check, and the
exit status from the count of failures."""
import sys


class Checks:
    def __init__(self, name):
        self.name = name
        self.failures = 0

    def report(self, ok, what):
        self.failures += not ok
        print("%s: %s" % (what, "ok" if ok else "FAIL"))

    def finish(self):
        print("%s: %d failures" % (self.name, self.failures))
        sys.exit(1 if self.failures else 0)
