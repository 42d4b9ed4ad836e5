#!/bin/sh
# bench.trace_set_order: a trace set holds more *.rep files than a trace row
# takes (256): the first 256 by name are replayed, and --list and the run
# say so. The directory scan used to stop after 256 entries in readdir
# order, so an arbitrary subset was replayed and --list said "256 files".
# Here the 44 files after the first 256 by name are broken traces: if any
# of them is picked, the replay exits 2 and the row fails.
#
#   trace_set_order.sh TESSERA
set -u
tessera=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-trace-order.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

mkdir -p "$work/sets/many"
i=0
while [ $i -lt 300 ]; do
  name=$(printf '%s/sets/many/t%03d.rep' "$work" $i)
  if [ $i -lt 256 ]; then printf '20000\n1\n2\n1\na 0 8\nf 0\n' >"$name"; else echo broken >"$name"; fi
  i=$((i + 1))
done

out=$(TESSERA_TRACES_DIR="$work/sets" "$tessera" bench --list 2>&1)
echo "$out" | grep -F "traces-many" || fail "no traces-many row in --list"
echo "$out" | grep -qF "300 files in $work/sets/many (the first 256 by name are replayed)" ||
  fail "--list does not say 300 files, the first 256 replayed"

out=$(TESSERA_TRACES_DIR="$work/sets" "$tessera" bench --workloads traces --allocators system --runs 1 \
      --scale 0.01 --no-charts --out "$work/results" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "tessera bench exited $rc"
echo "$out" | grep -qF "$work/sets/many: 300 trace files; only the first 256 by name are replayed" ||
  fail "the run does not note that only 256 of 300 files are replayed"
grep -q '^traces-many,system,1,1,.*,ok,.*traces=256' "$work/results/latest/results.csv" 2>/dev/null ||
  fail "traces-many did not replay the first 256 traces: $(cat "$work/results/latest/results.csv" 2>/dev/null)"
[ $failures -eq 0 ] && echo "bench.trace_set_order: ok"
exit $failures
