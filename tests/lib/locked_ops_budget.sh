#!/bin/sh
# locked_ops_budget.sh — locked instructions (callgrind's global bus events,
# --collect-bus=yes: lock-prefixed read-modify-writes and xchg) a large
# malloc+free cycle, not a timing.
#
#   locked_ops_budget.sh PROGRAM LIBRARY SINGLE_MAX THREADED_MIN
#
# Runs PROGRAM (tests/lib/locked_ops.c) with LIBRARY preloaded, twice with
# different cycle counts, single-threaded and then with a second thread
# waiting, and prints the difference per cycle. Exits 1 if the
# single-threaded cycle takes more than SINGLE_MAX (each such instruction
# waits for every store before it: the twenty-eighth session took the
# cycle from 18 to 0, docs/PERFORMANCE.md, bat28) or the threaded one fewer
# than THREADED_MIN (there the locks and the shared words' updates must be
# atomic). Exit 77 (skipped) when valgrind is not installed.
set -eu
if [ $# -ne 4 ]; then
  echo "usage: $0 PROGRAM LIBRARY SINGLE_MAX THREADED_MIN" >&2
  exit 2
fi
program="$1" lib="$2" single_max="$3" threaded_min="$4"
if ! command -v valgrind >/dev/null 2>&1; then
  echo "SKIP: valgrind is not installed (apt-get install valgrind)" >&2
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() { # cycles [threaded]: the run's bus events
  TESSERA_PURGE_DELAY_MS=3600000 LD_PRELOAD="$lib" valgrind --tool=callgrind --collect-bus=yes \
    --callgrind-out-file="$tmp/cg.out" "$program" "$@" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  grep -Eq '^c?fn=\([0-9]+\) tes_large_free$' "$tmp/cg.out" || {
    echo "FAIL: $lib was not preloaded (no tes_large_free in the profile)" >&2
    exit 1
  }
  # events: Ir Ge; the totals line: both counts.
  sed -n 's/^totals: *[0-9]* *\([0-9]*\).*/\1/p; s/^summary: *[0-9]* *\([0-9]*\).*/\1/p' "$tmp/cg.out" | head -n 1
}
status=0
for mode in single threaded; do
  arg=""
  [ "$mode" = threaded ] && arg=threaded
  few=$(count 1000 $arg)
  many=$(count 3000 $arg)
  per=$(awk -v a="$few" -v b="$many" 'BEGIN { printf "%.2f", (b - a) / 2000 }')
  echo "large malloc+free cycle, $mode: $per locked instructions"
  if [ "$mode" = single ] && awk -v v="$per" -v b="$single_max" 'BEGIN { exit !(v > b) }'; then
    echo "FAIL: single-threaded: $per locked instructions a cycle, at most $single_max" >&2
    status=1
  fi
  if [ "$mode" = threaded ] && awk -v v="$per" -v b="$threaded_min" 'BEGIN { exit !(v < b) }'; then
    echo "FAIL: threaded: $per locked instructions a cycle, at least $threaded_min expected" >&2
    status=1
  fi
done
exit $status
