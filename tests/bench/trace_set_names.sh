#!/bin/sh
# trace_set_names.sh TESSERA — a trace set whose directory name cannot make
# a row name traces-<set> (a space; more than 56 bytes) is not run, and both
# --list and the run's notes say so: a set with a space was listed by --list
# and silently left out of the run, and names were cut at 50 bytes, so two
# long sets sharing those 50 were merged into one row of the report.
set -u
tessera=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
long=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa  # 52 bytes: 58 with the suffix
for set in ok "with space" "${long}_first" "${long}_other"; do
  mkdir -p "$tmp/traces/$set"
  "$tessera" lab gen binary --ops 200 -o "$tmp/traces/$set/t.rep" || fail "lab gen"
done
list=$(TESSERA_TRACES_DIR="$tmp/traces" "$tessera" bench --list) || fail "--list exited $?"
echo "$list"
echo "$list" | grep -q '^  traces-ok  *1 files in ' || fail "traces-ok not listed as a row"
for set in "with space" "${long}_first" "${long}_other"; do
  echo "$list" | grep -qF "  $set " || fail "$set not listed"
  echo "$list" | grep -F "$tmp/traces/$set (not run: its row, traces-<set>, takes at most 56" >/dev/null ||
    fail "--list does not say $set is not run"
done
out=$(TESSERA_TRACES_DIR="$tmp/traces" "$tessera" bench --workloads traces --allocators system --runs 1 \
  --scale 0.01 --no-charts --out "$tmp/out" 2>&1) || fail "the run exited $?: $out"
echo "$out"
report="$tmp/out/latest/report.md"
for set in "with space" "${long}_first" "${long}_other"; do
  grep -qF -- "- trace set $tmp/traces/$set: not run: its row, traces-<set>, takes at most 56" "$report" ||
    fail "no note for $set in report.md"
done
test "$(cut -d, -f1 "$tmp/out/latest/results.csv" | sort -u | tr '\n' ' ')" = "traces-ok workload " ||
  fail "rows other than traces-ok ran: $(cut -d, -f1 "$tmp/out/latest/results.csv" | sort -u)"
echo ok
