#!/usr/bin/env python3
"""Per-row and geometric-mean time ratios of every allocator of a
`tessera bench` results.csv against a baseline (docs/RELIABILITY.md,
twenty-ninth session, abl29). The time is the median over runs of work_s
(the workload's measured region, else wall, as tessera bench's own
ratios); several results.csv files may be given with a comma.
Usage: geomean.py RESULTS.csv[,MORE.csv] [BASELINE] [--rss | --cpu] [--skip row,row]
(--cpu: user+sys time instead; --rss: peak RSS)"""
import csv, math, statistics, sys
from collections import defaultdict

args = [a for a in sys.argv[1:] if not a.startswith("--")]
path = args[0]
base = args[1] if len(args) > 1 else "tessera"
metric = "peak_rss_kib" if "--rss" in sys.argv else "cpu_s" if "--cpu" in sys.argv else "work_s"
skip = set()
if "--skip" in sys.argv:
    skip = set(sys.argv[sys.argv.index("--skip") + 1].split(","))
runs = defaultdict(list)
order, allocs = [], []
rows_in = [r for one in path.split(",") for r in csv.DictReader(open(one))]
for r in rows_in:
    if r["status"] != "ok":
        continue
    row = r["workload"] + ("" if r["threads"] in ("", "1") or r["workload"] in ("traces",) else "/%st" % r["threads"])
    if row in skip or r["workload"] in skip:
        continue
    if row not in order:
        order.append(row)
    if r["allocator"] not in allocs:
        allocs.append(r["allocator"])
    value = r[metric] or (r["wall_s"] if metric == "work_s" else "")  # no measured region: wall, as tessera bench
    if value:
        runs[row, r["allocator"]].append(float(value))
others = [a for a in allocs if a != base]
print("| row | " + " | ".join(others) + " |")
print("|---|" + "---:|" * len(others))
logs = defaultdict(list)
for row in order:
    if (row, base) not in runs:
        continue
    b = statistics.median(runs[row, base])
    cells = []
    for a in others:
        if (row, a) in runs and b > 0:
            q = statistics.median(runs[row, a]) / b
            logs[a].append(math.log(q))
            cells.append("%.2f" % q)
        else:
            cells.append("-")
    print("| %s | %s |" % (row, " | ".join(cells)))
print("| **geomean** (%d rows) | %s |" % (len(logs[others[0]]),
      " | ".join("**%.3f**" % math.exp(sum(logs[a]) / len(logs[a])) for a in others)))
