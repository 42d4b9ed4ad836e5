#!/usr/bin/env python3
"""Side-by-side peak RSS of allocator libraries on one program.

  bench/rss_preload.py ROUNDS "PROGRAM [ARGS]" NAME=LIB[:VAR=VALUE...] ...

Runs PROGRAM under LD_PRELOAD of each variant in turn, ROUNDS times (the
order rotated every round and reversed every other cycle, as
bench/ab_preload.py does), with the variant's environment variables set
(NAME=LIB:TESSERA_LARGE_PACK=0 is LIB with packing off). Prints per
variant the median peak RSS (wait4's ru_maxrss) and every run's, sorted,
in MiB, the median work_s the program reports and the median minor-fault
count. List a library twice (two copies, or the same file under two
names) as an A/A control: RSS modes show up as two clusters in the sorted
runs, which a median alone hides. A peak below the interpreter's own
(about 14.7 MiB here) reads as the interpreter's: the child's ru_maxrss
keeps the high-water mark of the Python process it was forked from across
the exec (bench_single --scale 0.02 reads 14.7 under every library). For
small programs use build/bench/bench_tiny_exec.
"""
import os
import statistics as st
import subprocess
import sys

from ab_preload import rotated


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    rounds, program, specs = int(sys.argv[1]), sys.argv[2].split(), sys.argv[3:]
    variants = []
    for spec in specs:
        name, rest = spec.split("=", 1)
        parts = rest.split(":")
        env = dict(os.environ, LD_PRELOAD=parts[0])
        for assignment in parts[1:]:
            key, value = assignment.split("=", 1)
            env[key] = value
        variants.append((name, env))
    results = {name: [] for name, _ in variants}
    for r in range(rounds):
        for name, env in rotated(variants, r):
            child = subprocess.Popen(program, env=env, stdout=subprocess.PIPE, text=True)
            out = child.stdout.read()
            _, status, usage = os.wait4(child.pid, 0)
            if status != 0:
                sys.exit("%s failed under %s (status %d)" % (program[0], name, status))
            work = next((float(w[7:]) for w in out.split() if w.startswith("work_s=")), 0.0)
            results[name].append((usage.ru_maxrss / 1024.0, work, usage.ru_minflt))
    for name, _ in variants:
        rss = sorted(x[0] for x in results[name])
        print("%-14s peak MiB median %.1f  [%s]  work median %.3f  minflt %d" % (
            name, st.median(rss), " ".join("%.1f" % x for x in rss), st.median(x[1] for x in results[name]),
            st.median(x[2] for x in results[name])))


if __name__ == "__main__":
    main()
