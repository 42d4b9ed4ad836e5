#!/bin/sh
# slowpath_budget.sh — instructions per call of the malloc slow path
# (tes_heap_malloc_generic, with everything it calls; or FUNCTION, e.g.
# tes_heap_malloc_miss, where malloc's fast path goes when it misses, or
# tes_free_slow, where free's goes), measured with callgrind (not a timing).
#
#   slowpath_budget.sh BUDGET PROGRAM LIBRARY [FUNCTION [MAX_CALLS]]
#
# Runs PROGRAM (slowpath_budget) under callgrind with LIBRARY preloaded and
# TESSERA_PURGE_DELAY_MS at its maximum, so that no timed work (the default
# build's bin flush, the hardened build's kept-page window, purges) falls
# due during the run: the same calls every run. Prints the slow path's
# inclusive count divided by its calls (by $SLOWPATH_PER_MALLOCS when set:
# the workload's mallocs); exits 1 if that exceeds BUDGET, or
# if the slow path was never reached (the test would prove nothing), or
# with MAX_CALLS, if it was reached more often than that. Exit 77
# (skipped) when valgrind or callgrind_annotate is not installed.
set -eu
if [ $# -lt 3 ] || [ $# -gt 5 ]; then
  echo "usage: $0 BUDGET PROGRAM LIBRARY [FUNCTION [MAX_CALLS]]" >&2
  exit 2
fi
budget="$1" program="$2" lib="$3" fn="${4:-tes_heap_malloc_generic}" max_calls="${5:-}"
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
# From the raw profile: every call of FUNCTION from another function, with
# the inclusive count callgrind records for it. (callgrind_annotate's
# calling tree splits an inlined function's cost over several file:function
# entries and names one caller twice: read from it, the calls of
# tes_heap_malloc_generic were counted twice and the cost per call came out
# at half the truth, 78.2 against 201.7 in the default build.)
set -- $(awk -v fn="$fn" '
  function name(spec,   id) {  # "(id) name" or "(id)": the name, recorded
    id = spec; sub(/\).*/, "", id); sub(/^\(/, "", id)
    if (spec ~ /\) /) { sub(/^\([0-9]+\) /, "", spec); names[id] = spec }
    return names[id]
  }
  /^fn=/ { caller = name(substr($0, 4)); next }
  /^cfn=/ { callee = name(substr($0, 5)); next }
  /^calls=/ { n = $0; sub(/^calls=/, "", n); sub(/ .*/, "", n); pending = (callee == fn && caller != fn); next }
  pending { calls += n; incl += $2; pending = 0 }
  END { printf "%d %d\n", incl, calls }' "$tmp/cg.out")
incl="$1" calls="$2"
if [ "$calls" -eq 0 ]; then
  echo "FAIL: $fn was not called (or not found in $lib)" >&2
  exit 1
fi
if [ -n "${SLOWPATH_PER_MALLOCS:-}" ]; then
  # The slow path's whole cost over the workload's mallocs instead of over
  # its own calls: a change that sends fewer, cheap calls there (a bin that
  # grows, heap.c's bin_grow) raises the average a call while the total
  # falls.
  per=$(awk -v a="$incl" -v n="$SLOWPATH_PER_MALLOCS" 'BEGIN { printf "%.2f", a / n }')
  echo "slow path ($fn): $per instructions a malloc of $SLOWPATH_PER_MALLOCS ($calls calls, $(awk -v a="$incl" -v n="$calls" 'BEGIN { printf "%.1f", a / n }') a call; budget $budget)"
else
  per=$(awk -v a="$incl" -v n="$calls" 'BEGIN { printf "%.1f", a / n }')
  echo "slow path ($fn): $per instructions a call over $calls calls (budget $budget)"
fi
if awk -v v="$per" -v b="$budget" 'BEGIN { exit !(v > b) }'; then
  echo "FAIL: $per instructions a call, budget $budget" >&2
  exit 1
fi
if [ -n "$max_calls" ] && [ "$calls" -gt "$max_calls" ]; then
  echo "FAIL: $calls calls of $fn, at most $max_calls" >&2
  exit 1
fi
