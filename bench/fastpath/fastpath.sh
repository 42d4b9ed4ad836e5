#!/bin/sh
# fastpath.sh — instructions per malloc+free pair, measured with callgrind.
#
#   fastpath.sh [--check BUDGET] [--pairs N] PROGRAM NAME=LIBRARY...
#
# For each allocator (NAME=path of a malloc library to LD_PRELOAD; an empty
# path means the system allocator) it runs PROGRAM (fastpath_bench) under
# `valgrind --tool=callgrind --toggle-collect=run_*` in the modes pingpong
# and lifo and in their -empty twins, and prints
#   (instructions in the loop - instructions of the empty loop) / pairs
# as a Markdown table, plus the instructions of one malloc_usable_size call
# (mode usable minus mode pingpong, per pair). Callgrind counts are deterministic, so one run each
# is enough. With --check BUDGET it exits 1 if any figure exceeds BUDGET.
# Exit 77 (skipped) when valgrind is not installed.
set -eu
budget=""
pairs=200000
while [ $# -gt 0 ]; do
  case "$1" in
    --check) budget="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "usage: $0 [--check BUDGET] [--pairs N] PROGRAM NAME=LIBRARY..." >&2
  exit 2
fi
program="$1"; shift
if ! command -v valgrind >/dev/null 2>&1; then
  echo "SKIP: valgrind is not installed (apt-get install valgrind)" >&2
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Instructions collected inside run_* for one run.
count() { # library mode
  out="$tmp/cg.out"
  if [ -n "$1" ]; then
    LD_PRELOAD="$1" valgrind --tool=callgrind --toggle-collect='run_*' --callgrind-out-file="$out" \
      "$program" "$2" "$pairs" >/dev/null 2>&1
  else
    valgrind --tool=callgrind --toggle-collect='run_*' --callgrind-out-file="$out" \
      "$program" "$2" "$pairs" >/dev/null 2>&1
  fi
  sed -n 's/^totals: *\([0-9]*\).*/\1/p; s/^summary: *\([0-9]*\).*/\1/p' "$out" | head -n 1
}

empty_pingpong=$(count "" pingpong-empty)
empty_lifo=$(count "" lifo-empty)
status=0
echo "| allocator | 32-byte ping-pong | random 8-512 B, LIFO batches of 100 | malloc_usable_size |"
echo "|---|---:|---:|---:|"
for spec in "$@"; do
  name="${spec%%=*}"
  lib="${spec#*=}"
  if [ -n "$lib" ] && [ ! -e "$lib" ]; then
    echo "| $name | (not installed: $lib) | | |"
    continue
  fi
  pp=$(count "$lib" pingpong)
  lf=$(count "$lib" lifo)
  us=$(count "$lib" usable)
  pp_pair=$(awk -v a="$pp" -v b="$empty_pingpong" -v n="$pairs" 'BEGIN { printf "%.1f", (a - b) / n }')
  lf_pair=$(awk -v a="$lf" -v b="$empty_lifo" -v n="$pairs" 'BEGIN { printf "%.1f", (a - b) / n }')
  us_call=$(awk -v a="$us" -v b="$pp" -v n="$pairs" 'BEGIN { printf "%.1f", (a - b) / n }')
  echo "| $name | $pp_pair | $lf_pair | $us_call |"
  if [ -n "$budget" ]; then
    for v in "$pp_pair" "$lf_pair"; do
      if awk -v v="$v" -v b="$budget" 'BEGIN { exit !(v > b) }'; then
        echo "FAIL: $name needs $v instructions per pair, budget $budget" >&2
        status=1
      fi
    done
  fi
done
exit $status
