#!/bin/sh
# grow_budget.sh — instructions per realloc that grows a large block by one
# byte, measured with callgrind (not a timing).
#
#   grow_budget.sh BUDGET PROGRAM LIBRARY
#
# Runs PROGRAM (grow_budget) under `valgrind --tool=callgrind
# --toggle-collect=run_*` in modes grow and empty with LIBRARY preloaded and
# prints (grow - empty) / calls; exits 1 if that exceeds BUDGET. glibc's
# realloc needs about 84 there; ours needed 236 until a realloc within the
# block's pages returned before the in-use gauge's atomic add, and walked
# the segment map twice (3.3x glibc's time growing a buffer to 20 MB).
# Exit 77 (skipped) when valgrind is not installed.
set -eu
if [ $# -ne 3 ]; then
  echo "usage: $0 BUDGET PROGRAM LIBRARY" >&2
  exit 2
fi
budget="$1" program="$2" lib="$3"
calls=100000
if ! command -v valgrind >/dev/null 2>&1; then
  echo "SKIP: valgrind is not installed (apt-get install valgrind)" >&2
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() { # mode
  LD_PRELOAD="$lib" valgrind --tool=callgrind --toggle-collect='run_*' --callgrind-out-file="$tmp/cg.out" \
    "$program" "$1" "$calls" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  sed -n 's/^totals: *\([0-9]*\).*/\1/p; s/^summary: *\([0-9]*\).*/\1/p' "$tmp/cg.out" | head -n 1
}
grow=$(count grow)
empty=$(count empty)
per=$(awk -v a="$grow" -v b="$empty" -v n="$calls" 'BEGIN { printf "%.1f", (a - b) / n }')
echo "realloc growing a large block by one byte: $per instructions a call (budget $budget)"
if awk -v v="$per" -v b="$budget" 'BEGIN { exit !(v > b) }'; then
  echo "FAIL: $per instructions a call, budget $budget" >&2
  exit 1
fi
