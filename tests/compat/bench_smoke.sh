#!/bin/sh
# bench_smoke.sh BENCH_DIR — runs each fit workload briefly under every
# allocator it supports (and the null one) and checks that it prints a
# well-formed result line with a fragmentation in [0, 1] and the timed
# loop's minor-fault count. Sizes are toy: this tests the programs,
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
  echo "$1" | grep -q ' minflt=[0-9][0-9]*$' || { echo "no minor-fault count in: $1"; fail=1; }
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
# --impl null allocates nothing (the workload's own cost): no data segment.
for w in equal small_range large_range cpe357; do
  line=$("$dir/fit_$w" --impl null --iters 2 | grep '^result.*impl=null variant=null') || { echo "fit_$w --impl null: no result"; fail=1; continue; }
  check "$line"
  echo "$line" | grep -q 'fragmentation=n/a segment=0 free=0 ' || { echo "--impl null has a data segment: $line"; fail=1; }
done
# --seed changes the random workloads' sizes (so their data segment), and
# the same seed gives the same run.
seg() { "$dir/fit_small_range" --impl bf --iters 2 "$@" | tr ' ' '\n' | sed -n 's/^segment=//p'; }
s0=$(seg); s0again=$(seg --seed 0); s7=$(seg --seed 7)
[ "$s0" = "$s0again" ] || { echo "--seed 0 is not the default: $s0 vs $s0again"; fail=1; }
[ "$s0" != "$s7" ] || { echo "--seed 7 gave the same data segment as seed 0 ($s0)"; fail=1; }
[ "$s7" = "$(seg --seed 7)" ] || { echo "--seed 7 is not repeatable"; fail=1; }
# Bad options are refused with a usage message and status 2.
if "$dir/fit_equal" --impl nope >/dev/null 2>&1; then echo "bad --impl accepted"; fail=1; fi
if "$dir/fit_equal" --iters x >/dev/null 2>&1; then echo "bad --iters accepted"; fail=1; fi
for bad in x -1 '' 4294967296; do
  if "$dir/fit_small_range" --seed "$bad" >/dev/null 2>&1; then echo "bad --seed '$bad' accepted"; fail=1; fi
done
exit $fail
