#!/usr/bin/env python3
"""Charts for a `tessera bench` results directory.

Reads DIR/results.csv (and DIR/rss_series.csv) written by `tessera bench`
and draws, with matplotlib:
  time_ratios.png    median time of each allocator / the baseline's, per
                     workload row (grouped bars, log scale; 1.0 = baseline)
  peak_rss.png       median peak RSS per workload row (grouped bars, log scale)
  footprint_rss.png  RSS over time of the footprint workload, one line per
                     allocator (first run)
Failed runs are left out of the medians; a cell with any failed run gets no
bar and is marked "fail" on the time chart, so failures stay visible.
Called by tools/cmd_bench.c with the interpreter of the project's .venv;
runnable by hand: .venv/bin/python bench/plot.py [--baseline NAME] DIR
"""
import argparse
import csv
import math
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import matplotlib.ticker  # noqa: E402


def read_runs(path, metric="work"):
    rows = {}  # (label) -> {allocator: {"time": [], "rss": [], "failed": bool}}
    order, allocators = [], []
    with open(path, newline="") as f:
        for rec in csv.DictReader(f):
            threads = int(rec["threads"])
            label = rec["workload"] if threads == 1 else "%s/%dt" % (rec["workload"], threads)
            if label not in rows:
                rows[label] = {}
                order.append(label)
            alloc = rec["allocator"]
            if alloc not in allocators:
                allocators.append(alloc)
            cell = rows[label].setdefault(alloc, {"time": [], "rss": [], "failed": False, "skipped": False})
            if rec["status"] == "skipped":
                cell["skipped"] = True
                continue
            if rec["status"] != "ok":
                cell["failed"] = True
                continue
            if metric == "cpu":
                t = rec["cpu_s"]
            elif metric == "wall":
                t = rec["wall_s"]
            else:
                t = rec["work_s"] or rec["wall_s"]
            cell["time"].append(float(t))
            cell["rss"].append(float(rec["peak_rss_kib"]) / 1024.0)
    return order, allocators, rows


PREFERRED = ["system", "tessera", "jemalloc", "tcmalloc", "mimalloc"]


def ordered(allocators):
    """The report's column order: known allocators first, then the rest as they came."""
    known = [a for a in PREFERRED if a in allocators]
    return known + [a for a in allocators if a not in PREFERRED]


def color_of(alloc, allocators):
    """One colour per allocator, the same on every chart."""
    palette = plt.get_cmap("tab10").colors
    names = PREFERRED + [a for a in allocators if a not in PREFERRED]
    return palette[names.index(alloc) % len(palette)]


def median_or_none(values):
    return statistics.median(values) if values else None


def figure_width(labels):
    """Inches: room for the labels, but never wider than a page on screen."""
    return min(16.0, max(8.0, 0.5 * len(labels)))


def grouped_bars(ax, labels, allocators, value_of, log=True):
    width = 0.8 / max(1, len(allocators))
    for i, alloc in enumerate(allocators):
        xs, ys = [], []
        for j, label in enumerate(labels):
            v = value_of(label, alloc)
            if v is not None and v > 0:
                xs.append(j + (i - (len(allocators) - 1) / 2) * width)
                ys.append(v)
        ax.bar(xs, ys, width, label=alloc, color=color_of(alloc, allocators))
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
    if log:
        ax.set_yscale("log")
        # Labelled ticks at 1, 2 and 5 of every decade: readable at any range.
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=min(5, len(allocators)))


def time_ratio_chart(out, order, allocators, rows, baseline, metric):
    def ratio(label, alloc):
        cell, base = rows[label].get(alloc), rows[label].get(baseline)
        if not cell or not base or cell["failed"] or base["failed"]:
            return None
        m, b = median_or_none(cell["time"]), median_or_none(base["time"])
        return m / b if m and b else None

    # The baseline's own bars would all be 1.0: the horizontal line shows it.
    allocators = [a for a in allocators if a != baseline]
    labels = [l for l in order if any(ratio(l, a) for a in allocators) or
              any(rows[l].get(a, {}).get("failed") for a in allocators)]
    fig, ax = plt.subplots(figsize=(figure_width(labels), 6))
    grouped_bars(ax, labels, allocators, ratio)
    ax.axhline(1.0, color="black", linewidth=0.8)
    for j, label in enumerate(labels):
        for i, alloc in enumerate(allocators):
            cell = rows[label].get(alloc)
            if cell and cell["failed"]:
                x = j + (i - (len(allocators) - 1) / 2) * (0.8 / len(allocators))
                ax.text(x, 1.0, "fail", rotation=90, fontsize=7, color="red", ha="center", va="bottom")
    ax.set_ylabel("median %s time / %s (log scale; lower is faster)" % (metric, baseline))
    ax.set_title("Time relative to %s, per workload" % baseline)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def rss_chart(out, order, allocators, rows):
    def rss(label, alloc):
        cell = rows[label].get(alloc)
        return median_or_none(cell["rss"]) if cell and not cell["failed"] else None

    labels = [l for l in order if any(rss(l, a) for a in allocators)]
    fig, ax = plt.subplots(figsize=(figure_width(labels), 6))
    grouped_bars(ax, labels, allocators, rss)
    ax.set_ylabel("median peak RSS, MiB (log scale)")
    ax.set_title("Peak resident memory per workload")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def footprint_chart(out, series_path):
    if not os.path.exists(series_path):
        return False
    lines = {}
    with open(series_path, newline="") as f:
        for rec in csv.DictReader(f):
            if rec["run"] != "1":
                continue
            key = rec["allocator"]
            lines.setdefault(key, ([], []))
            lines[key][0].append(float(rec["t_s"]))
            lines[key][1].append(int(rec["rss_kib"]) / 1024.0)
    if not lines:
        return False
    fig, ax = plt.subplots(figsize=(9, 5))
    for alloc in ordered(list(lines)):
        ts, rss = lines[alloc]
        ax.plot(ts, rss, label=alloc, linewidth=1.2, color=color_of(alloc, list(lines)))
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("RSS, MiB")
    ax.set_title("footprint workload: resident memory over time (run 1)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="system")
    parser.add_argument("--metric", choices=("work", "wall", "cpu"), default="work",
                        help="time compared: measured region (default), process wall, or CPU")
    parser.add_argument("dir")
    args = parser.parse_args()
    results = os.path.join(args.dir, "results.csv")
    if not os.path.exists(results):
        print("plot.py: %s does not exist" % results, file=sys.stderr)
        return 2
    order, allocators, rows = read_runs(results, args.metric)
    allocators = ordered(allocators)
    if not order:
        print("plot.py: %s has no runs" % results, file=sys.stderr)
        return 2
    if args.baseline in allocators:
        time_ratio_chart(os.path.join(args.dir, "time_ratios.png"), order, allocators, rows, args.baseline, args.metric)
    else:
        print("plot.py: baseline %s has no runs; no time-ratio chart" % args.baseline, file=sys.stderr)
    rss_chart(os.path.join(args.dir, "peak_rss.png"), order, allocators, rows)
    footprint_chart(os.path.join(args.dir, "footprint_rss.png"), os.path.join(args.dir, "rss_series.csv"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
