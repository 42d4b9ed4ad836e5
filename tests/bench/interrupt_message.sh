#!/bin/sh
# interrupt_message.sh TESSERA — a suite interrupted (SIGINT) exits 130 and
# names its results directory with the command that reports the runs so far,
# quoted for a shell (it said only "the runs so far are in results.csv",
# and an interrupted run writes no report). The command is run as printed.
set -u
tessera=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
out="$tmp/it's here"
"$tessera" bench --workloads single --allocators system --runs 1000 --scale 0.05 --no-charts --out "$out" \
  >"$tmp/log" 2>&1 &
pid=$!
i=0
while [ "$(cat "$out"/*/results.csv 2>/dev/null | wc -l)" -lt 3 ]; do
  i=$((i + 1))
  [ $i -lt 600 ] || { kill $pid; fail "no runs recorded in 60 s"; }
  sleep 0.1
done
kill -INT $pid
wait $pid
rc=$?
cat "$tmp/log"
test $rc -eq 130 || fail "interrupted suite exited $rc, not 130"
dir=$(ls -d "$out"/2*)
grep -qF "tessera bench: interrupted; the runs so far are in $dir/results.csv (report them: tessera bench --from " "$tmp/log" ||
  fail "the message does not name $dir"
cmd=$(sed -n 's/.*(report them: tessera \(bench --from .*\))$/\1/p' "$tmp/log")
test -n "$cmd" || fail "no command in the message"
eval "set -- $cmd"
"$tessera" "$@" --no-charts >/dev/null || fail "the command printed ($cmd) exited $?"
test -f "$dir/report.md" || fail "the command printed did not report $dir"
echo ok
