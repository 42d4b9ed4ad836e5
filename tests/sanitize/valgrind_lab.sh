#!/usr/bin/env bash
# valgrind_lab.sh — memcheck on the `tessera` CLI's lab runs.
#
#   valgrind_lab.sh TESSERA_BIN
#
# Under valgrind memcheck (any error, or a definite/indirect leak, fails):
#   1. `tessera lab gen ... all` writes every generated pattern,
#   2. `tessera lab --compare --check-only` replays them on every policy,
#   3. a malformed trace is rejected with "file:line: what" and exit 2.
# Skips (77) when valgrind is not installed.
set -u
tessera=${1:?usage: valgrind_lab.sh TESSERA_BIN}
if ! command -v valgrind >/dev/null 2>&1; then
  echo "SKIP: valgrind not installed (Debian: apt-get install valgrind)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
vg() { valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect "$@"; }

vg "$tessera" lab gen --ops 1500 -o "$work/traces" all >"$work/gen.out" 2>&1
status=$?
[ "$status" -eq 0 ] || { cat "$work/gen.out"; echo "FAIL: lab gen under memcheck: status $status"; exit 1; }
n=$(ls "$work/traces"/*.rep | wc -l)
[ "$n" -ge 4 ] || { echo "FAIL: lab gen wrote $n traces"; exit 1; }

vg "$tessera" lab --compare --check-only --heap-cap 256M "$work/traces" >"$work/replay.out" 2>&1
status=$?
[ "$status" -eq 0 ] || { cat "$work/replay.out"; echo "FAIL: lab replay under memcheck: status $status"; exit 1; }
policies=$(grep -cE '^[a-z].* [0-9]+/[0-9]+ ' "$work/replay.out")

printf '100\n2\n3\n1\na 0 10\nq 0\nf 0\n' >"$work/bad.rep"
vg "$tessera" lab --check-only "$work/bad.rep" >"$work/bad.out" 2>&1
status=$?
[ "$status" -eq 2 ] || { cat "$work/bad.out"; echo "FAIL: malformed trace: status $status, want 2"; exit 1; }
grep -q "bad.rep:6: " "$work/bad.out" || { cat "$work/bad.out"; echo "FAIL: no file:line message"; exit 1; }

echo "OK: memcheck clean on lab gen ($n traces), replay on $policies policies, and the malformed-trace path"
