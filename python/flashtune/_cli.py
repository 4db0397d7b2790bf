"""The flashtune command as a pip install puts it on PATH: runs the binary built into the package."""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "flashtune")
    if not os.path.exists(exe):
        sys.exit("flashtune: the command is not in this package (%s); it comes with pip install of the "
                 "repository" % exe)
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
