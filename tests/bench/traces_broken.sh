#!/bin/sh
# bench.traces_broken: bench_traces reads traces with the lab's parser, so
# every malformed trace is refused exactly as `tessera lab` refuses it (the
# same `file:line: message` on stderr, exit status 2, nothing on stdout),
# never replayed half-parsed and never a crash. Covers the lab's broken-trace
# corpus plus traces that fooled the old sscanf reader: a header whose
# num_ids made `num_ids * sizeof(void *)` wrap to 0, sizes and ids with junk
# glued on, a request line longer than its 256-byte buffer, a second `a` of a
# live id, negative and huge sizes (which it called "skipped").
#
#   traces_broken.sh BENCH_TRACES TESSERA LAB_TRACES_DIR
set -u
bench=$1
tessera=$2
corpus=$3/broken
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-traces-broken.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

fail() { echo "FAIL $*"; failures=$((failures + 1)); }

t() { # t NAME HEADER-AND-LINES (printf format)
  printf "$2" >"$work/$1.rep"
}
wrap=2305843009213693952   # 2^61: times 8 bytes is 2^64, 0 in size_t
t wrap-out-of-range "1\n$wrap\n2\n1\na 0 8\na $wrap 8\n"
t wrap-truncated "1\n$wrap\n3\n1\na 0 8\nf 0\n"
t size-dash "1\n1\n1\n1\na 0 4-010\n"
t size-letters "1\n1\n1\n1\na 0 40a72\n"
t glued-op "1\n1\n1\n1\na0 8 junk extra\n"
t extra-fields "1\n1\n1\n1\na 0 8 junk extra\n"
t negative-id "1\n2\n1\n1\nr -1 8\n"
t alloc-twice "1\n2\n2\n1\na 0 8\na 0 16\n"
t negative-size "1\n1\n1\n1\na 0 -5\n"
t size-past-2-64 "1\n1\n1\n1\na 0 99999999999999999999\n"
t size-past-2-48 "1\n1\n1\n1\nr 0 300000000000000\n"
# A request line longer than 256 bytes with junk at its end: reported at its
# own line, and the line numbers after it stay right.
{ printf '1\n1\n2\n1\na 0 8'; i=0; while [ $i -lt 40 ]; do printf '        '; i=$((i + 1)); done
  printf 'x\nf 0\n'; } >"$work/long-line.rep"
{ printf '1\n1\n3\n1\na 0 8'; i=0; while [ $i -lt 40 ]; do printf '        '; i=$((i + 1)); done
  printf '\nf 0\nq 0\n'; } >"$work/after-long-line.rep"

checked=0
for f in "$corpus"/*.rep "$work"/*.rep; do
  lab_err=$("$tessera" lab --check-only "$f" 2>&1 >/dev/null); lab_rc=$?
  out=$("$bench" --scale 0.01 "$f" 2>"$work/err"); rc=$?
  err=$(cat "$work/err")
  checked=$((checked + 1))
  [ "$lab_rc" -eq 2 ] || { fail "$f: tessera lab exited $lab_rc (the test expects a broken trace)"; continue; }
  [ "$rc" -eq 2 ] || { fail "$f: bench_traces exited $rc, want 2 (stderr: $err)"; continue; }
  [ -z "$out" ] || fail "$f: bench_traces printed results: $out"
  [ "$err" = "$lab_err" ] || fail "$f: bench_traces said '$err', tessera lab '$lab_err'"
  case "$err" in "$f":[0-9]*:\ *) ;; *) fail "$f: '$err' is not FILE:LINE: message" ;; esac
done
"$bench" "$work/after-long-line.rep" 2>&1 | grep -q "after-long-line.rep:7: unknown request 'q'" ||
  fail "after-long-line.rep: the line after a long one is not reported as line 7"

# A broken trace among good ones: nothing runs.
out=$("$bench" --scale 0.01 "$3/good/classic-small.rep" "$work/size-dash.rep" 2>"$work/err"); rc=$?
[ "$rc" -eq 2 ] && [ -z "$out" ] && grep -q "size-dash.rep:5: " "$work/err" ||
  fail "good + broken: exit $rc, stdout '$out', stderr '$(cat "$work/err")'"

# The wrap header itself is a legal trace (the lab renumbers ids densely):
# replayed with one slot, not an out-of-bounds write.
printf "1\n$wrap\n3\n1\na 7 8\nr 7 64\nf 7\n" >"$work/wrap-ok.rep"
out=$("$bench" --scale 0.01 "$work/wrap-ok.rep" 2>"$work/err"); rc=$?
[ "$rc" -eq 0 ] && echo "$out" | grep -q '^traces=1$' ||
  fail "wrap-ok.rep: exit $rc, stdout '$out', stderr '$(cat "$work/err")'"

echo "bench.traces_broken: $checked broken traces checked, $failures failure(s)"
[ "$failures" -eq 0 ]
