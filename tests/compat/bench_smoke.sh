#!/bin/sh
# bench_smoke.sh BENCH_DIR — runs each fit workload briefly under every
# allocator it supports and checks that it prints a well-formed result line
# with a fragmentation in [0, 1]. Sizes are toy: this tests the programs,
# not the allocators' speed.
set -eu
dir=$1
fail=0
check() { # check LINE
  echo "$1"
  frag=$(echo "$1" | tr ' ' '\n' | sed -n 's/^fragmentation=//p')
  case "$frag" in
    n/a) ;;
    *) awk -v f="$frag" 'BEGIN { exit !(f >= 0 && f <= 1) }' || { echo "bad fragmentation: $frag"; fail=1; } ;;
  esac
  echo "$1" | grep -q 'time_s=[0-9.]* cpu_s=[0-9.]*' || { echo "no time in: $1"; fail=1; }
}
for impl in ff bf malloc; do
  check "$("$dir/fit_equal" --impl "$impl" --iters 2 | grep '^result')"
  check "$("$dir/fit_small_range" --impl "$impl" --iters 2 | grep '^result')"
  check "$("$dir/fit_large_range" --impl "$impl" --iters 2 | grep '^result')"
  check "$("$dir/fit_cpe357" --impl "$impl" --iters 50 | grep '^result')"
done
for impl in ff bf; do
  check "$("$dir/fit_small_range" --impl "$impl" --naive --iters 2 | grep '^result.*variant=naive')"
  check "$("$dir/fit_cpe357" --impl "$impl" --naive --iters 50 | grep '^result.*variant=naive')"
done
# Bad options are refused with a usage message and status 2.
if "$dir/fit_equal" --impl nope >/dev/null 2>&1; then echo "bad --impl accepted"; fail=1; fi
if "$dir/fit_equal" --iters x >/dev/null 2>&1; then echo "bad --iters accepted"; fail=1; fi
exit $fail
