#!/bin/sh
# slowpath_budget.sh — instructions per call of the malloc slow path
# (tes_heap_malloc_generic, with everything it calls), measured with
# callgrind (not a timing).
#
#   slowpath_budget.sh BUDGET PROGRAM LIBRARY
#
# Runs PROGRAM (slowpath_budget) under callgrind with LIBRARY preloaded and
# TESSERA_PURGE_DELAY_MS at its maximum, so that no timed work (the default
# build's bin flush, the hardened build's kept-page window, purges) falls
# due during the run: the same calls every run. Prints the slow path's
# inclusive count divided by its calls; exits 1 if that exceeds BUDGET, or
# if the slow path was never reached (the test would prove nothing). Exit 77
# (skipped) when valgrind or callgrind_annotate is not installed.
set -eu
if [ $# -ne 3 ]; then
  echo "usage: $0 BUDGET PROGRAM LIBRARY" >&2
  exit 2
fi
budget="$1" program="$2" lib="$3"
for tool in valgrind callgrind_annotate; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed (apt-get install valgrind)" >&2
    exit 77
  fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TESSERA_PURGE_DELAY_MS=3600000 LD_PRELOAD="$lib" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
  "$program" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
# The function's inclusive count is its "*" line; its calls are the sum of
# the "(Nx)" counts on the lines of its callers that name it.
callgrind_annotate --inclusive=yes --threshold=100 --tree=calling "$tmp/cg.out" >"$tmp/tree"
set -- $(awk '
  /[*] +[^ ]*:tes_heap_malloc_generic / { v = $1; gsub(",", "", v); incl = v }
  />[ ]+[^ ]*:tes_heap_malloc_generic \(/ { n = $0; sub(/.*\(/, "", n); sub(/x\).*/, "", n); gsub(",", "", n); calls += n }
  END { printf "%d %d\n", incl, calls }' "$tmp/tree")
incl="$1" calls="$2"
if [ "$calls" -eq 0 ]; then
  echo "FAIL: tes_heap_malloc_generic was not called (or not found in $lib)" >&2
  exit 1
fi
per=$(awk -v a="$incl" -v n="$calls" 'BEGIN { printf "%.1f", a / n }')
echo "malloc slow path: $per instructions a call over $calls calls (budget $budget)"
if awk -v v="$per" -v b="$budget" 'BEGIN { exit !(v > b) }'; then
  echo "FAIL: $per instructions a call, budget $budget" >&2
  exit 1
fi
