#!/usr/bin/env python3
"""Side-by-side timing of allocator libraries on one workload program.

  bench/ab_preload.py THREADS ROUNDS LIB0 LIB1 ... [-- ARGS...]

Runs PROGRAM --threads THREADS ARGS (PROGRAM ARGS when THREADS is `-`: the
fit_* programs take no --threads) under LD_PRELOAD of each library in
turn, ROUNDS times (the order rotated every round and reversed every other
cycle, so no library always runs first), and prints per library the median
work_s the program reports (time_s, the fit programs' timed loop), the median process CPU time (user + system of
the child), the medians of the per-round ratios of both to LIB0's, and the
median minor-fault count. PROGRAM is $BIN, build/bench/bench_mstress by
default. On a noisy machine, list LIB0 twice (two copies) as an A/A
control: its ratio's distance from 1.00 is the noise. Peak RSS is not
printed: a child started from Python reports the interpreter's high-water
mark as its ru_maxrss (about 14 MB), which the exec does not reset; use
build/bench/bench_tiny_exec (static) for peak RSS side by side.
"""
import os
import resource
import statistics as st
import subprocess
import sys


def run(program, threads, extra, lib):
    env = dict(os.environ, LD_PRELOAD=lib)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [program] + ([] if threads == "-" else ["--threads", threads]) + extra
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    words = out.split()
    key = "work_s=" if any(w.startswith("work_s=") for w in words) else "time_s="
    work = float(next(w for w in words if w.startswith(key))[len(key):])
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return work, cpu, r1.ru_minflt - r0.ru_minflt


def rotated(items, r):
    """Round r's running order of items: rotated by one each round and
    reversed every other cycle, so that no item always runs after the same
    neighbour (a cache or page cache warmed by it)."""
    k = r % len(items)
    order = list(items[k:]) + list(items[:k])
    if (r // len(items)) % 2:
        order.reverse()
    return order


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        extra = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    if len(args) < 3:
        sys.exit(__doc__)
    threads, rounds, libs = args[0], int(args[1]), args[2:]
    program = os.environ.get("BIN", "build/bench/bench_mstress")
    res = [[] for _ in libs]
    for r in range(rounds):
        for j in rotated(range(len(libs)), r):
            res[j].append(run(program, threads, extra, libs[j]))
    for j, lib in enumerate(libs):
        ratio = [st.median(res[j][i][m] / res[0][i][m] for i in range(rounds)) for m in (0, 1)]
        print("threads %s  %-48s work %.4f s cpu %.4f s  ratio work %.3f cpu %.3f  minflt %d" % (
            threads, lib, st.median(x[0] for x in res[j]), st.median(x[1] for x in res[j]), ratio[0], ratio[1],
            st.median(x[2] for x in res[j])))


if __name__ == "__main__":
    main()
