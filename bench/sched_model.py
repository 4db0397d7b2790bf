#!/usr/bin/env python3
"""How evenly a causal forward's row blocks spread over the H200's 132 multiprocessors, by a model
(no GPU): a block's work is its K/V tiles plus one for its prologue and epilogue, one CTA runs on
a multiprocessor at a time, and the efficiency is the work over 132 × the busiest one's. Orders:

  hardware   one CTA per block in blockIdx order (each head's blocks longest first, heads one
             after another), each taken by the first multiprocessor that frees up (balance=0)
  pairs      persistent CTAs, units of a head's i-th longest and i-th shortest block, dealt round
             robin (balance=1, templates/flash_fwd_sm90.cuh walk_next)
  LPT        every block of every head longest first, each to the first free multiprocessor: what a
             dynamic scheduler (an atomic tile counter, FlashAttention-3's for causal masks) does
  snake G    persistent, static: the blocks of G heads at a time longest first, dealt in a
             boustrophedon; G = all heads balances best but has every head's K/V in flight at once

It prices load balance only: not the L2 (why the heads go in sections), nor the overlap of a
persistent CTA's next block with its last. Grid: hidden 2048 (heads 2048 / d), 16k tokens a batch.

    python3 bench/sched_model.py
"""
import heapq
import math

SMS = 132


def blocks(s, bm, bn):
    """Work of a head's row blocks, longest first (sq = sk, bottom-right causal)."""
    return [math.ceil((s - k * bm) / bn) + 1.0 for k in range(math.ceil(s / bm))]


def greedy(order):
    free = [0.0] * SMS
    for w in order:
        heapq.heappush(free, heapq.heappop(free) + w)
    return max(free)


def dealt(order, snake=False):
    loads = [0.0] * SMS
    for i, w in enumerate(order):
        j, c = divmod(i, SMS)
        loads[SMS - 1 - c if snake and j % 2 else c] += w
    return max(loads)


def main():
    print("%-22s %8s %8s %8s %10s %10s" % ("causal shape", "hardware", "pairs", "LPT", "snake all", "snake 8"))
    for d, heads, tiles in ((64, 32, ((128, 128), (192, 128))), (128, 16, ((128, 128), (192, 128))),
                            (256, 8, ((128, 80), (128, 128)))):
        for bm, bn in tiles:
            for s in (512, 1024, 2048, 4096, 8192, 16384):
                nh = 16384 // s * heads
                per = blocks(s, bm, bn)
                m = len(per)
                total = sum(per) * nh
                hw = per * nh
                units = [per[i] + (per[m - 1 - i] if m - 1 - i != i else 0) for i in range((m + 1) // 2)] * nh
                lpt = sorted(hw, reverse=True)
                sect = [per[k] for g0 in range(0, nh, 8) for k in range(m) for _ in range(g0, min(nh, g0 + 8))]
                e = lambda span: total / (SMS * span)
                print("d=%3d %3dx%3d s=%5d %8.3f %8.3f %8.3f %10.3f %10.3f"
                      % (d, bm, bn, s, e(greedy(hw)), e(dealt(units)), e(greedy(lpt)), e(dealt(lpt, True)),
                         e(dealt(sect, True))))


if __name__ == "__main__":
    main()
