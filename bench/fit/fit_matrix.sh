#!/bin/sh
# fit_matrix.sh — runs every fit workload (equal, small_range, large_range,
# cpe357) under naive first fit, naive best fit, fast first fit, fast best fit,
# the system malloc and, when installed, mimalloc (LD_PRELOAD), and prints one
# table: wall seconds, CPU seconds and fragmentation (free / data segment).
#
# usage: fit_matrix.sh [--bin DIR] [--quick] [--skip-naive] [--workloads "equal small_range ..."]
#   --bin DIR      where fit_equal etc. are (default: this script's directory)
#   --quick        a tenth of the iterations (equal, cpe357) for a fast look
#   --skip-naive   leave out the naive versions (minutes at full size)
# Full size (the assignment's parameters) takes several minutes: the naive
# versions alone need tens of seconds per workload.
set -eu

bin=$(cd "$(dirname "$0")" && pwd)
quick=0
naive=1
workloads="equal small_range large_range cpe357"
mimalloc=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2
# An option's value, or a usage error (set -u would say "parameter not set").
value() { # value OPTION ARGC
  [ "$2" -ge 2 ] || { echo "fit_matrix.sh: $1 needs a value" >&2; exit 2; }
}
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) value "$1" $#; bin=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --skip-naive) naive=0; shift ;;
    --workloads) value "$1" $#; workloads=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "fit_matrix.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

# An empty list would print a table with no rows and exit 0.
case "$workloads" in
  *[![:space:]]*) ;;
  *) echo "fit_matrix.sh: --workloads needs at least one of: equal small_range large_range cpe357" >&2; exit 2 ;;
esac
for w in $workloads; do
  [ -x "$bin/fit_$w" ] || { echo "fit_matrix.sh: $bin/fit_$w not found (build the fit_* targets first)" >&2; exit 2; }
done

iters_for() {
  if [ "$quick" = 1 ]; then
    case "$1" in equal) echo "--iters 1000" ;; cpe357) echo "--iters 2000" ;; *) echo "" ;; esac
  fi
}

field() { # field NAME LINE
  echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

printf '%-12s %-14s %10s %10s %14s\n' workload allocator wall_s cpu_s fragmentation
for w in $workloads; do
  configs="ff-fast bf-fast malloc"
  [ "$naive" = 1 ] && configs="ff-naive bf-naive $configs"
  [ -r "$mimalloc" ] && configs="$configs mimalloc"
  for c in $configs; do
    case "$c" in
      ff-naive) line=$(TESSERA_FIT_IMPL=naive "$bin/fit_$w" --impl ff $(iters_for "$w") | grep '^result') ;;
      bf-naive) line=$(TESSERA_FIT_IMPL=naive "$bin/fit_$w" --impl bf $(iters_for "$w") | grep '^result') ;;
      ff-fast) line=$(TESSERA_FIT_IMPL=fast "$bin/fit_$w" --impl ff $(iters_for "$w") | grep '^result') ;;
      bf-fast) line=$(TESSERA_FIT_IMPL=fast "$bin/fit_$w" --impl bf $(iters_for "$w") | grep '^result') ;;
      malloc) line=$("$bin/fit_$w" --impl malloc $(iters_for "$w") | grep '^result') ;;
      mimalloc) line=$(LD_PRELOAD=$mimalloc "$bin/fit_$w" --impl malloc $(iters_for "$w") | grep '^result') ;;
    esac
    printf '%-12s %-14s %10s %10s %14s\n' "$w" "$c" "$(field time_s "$line")" \
      "$(field cpu_s "$line")" "$(field fragmentation "$line")"
  done
done
