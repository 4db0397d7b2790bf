"""The parts of bench/report.py (its command line), by what they do.

  systems      the systems compared: names, column labels and order, output tolerances
  stats        medians, quartiles and geometric means
  parse        what flashtune prints (the tune log's summary, FLASHTUNE_DEBUG dispatch lines and
               the bucket keys they name, durations) and bench/overhead.c's JSON
  dbsummary    the tuning cost a tuning database records, read through its views (schema 2 and
               3 alike), else through `flashtune query`; with a tune log, the cost of a tune
  environment  the machine, the libraries and the checkout a run measures on
  timing       interleaved CUDA-event timing with L2 flushes, the GPU memory of one call
  reference    the fp64 reference on sampled rows and the check of an output against it
  measure      a run: the systems, the grid of shapes, the measurement of one shape
  render       report.md
  plots        tflops_<dtype>.png
  output       report.json, report.md and the plots written; the parts of a split run merged
  testdata     what the self-tests run on: a tune log, a synthetic report, small databases
  selftest     runs the self-test of every module (no GPU, no PyTorch)

Importing any of them needs neither PyTorch nor a GPU: measure.run imports PyTorch when a run
starts. The Python binding (python/flashtune, for its FLOP count) is put on sys.path here.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))
