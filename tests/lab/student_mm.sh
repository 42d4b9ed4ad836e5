#!/bin/sh
# student_mm.sh CC SOURCE_DIR WORK_DIR TESSERA — `tessera lab --mm`: a
# student's malloc-lab mm.c, built as a shared object against the mock
# classic handout (tests/lab/handout), graded by the lab driver.
#  1. make_mm.sh's mm.c for segregated-apart, loaded with --mm, scores
#     exactly as the built-in policy on the project's own traces;
#  2. a student's realloc that loses a byte, a block that overlaps the one
#     before it, a write a page past the break (the checked pass guards
#     the heap's end) and a failing assert (SIGABRT) are reported with the
#     trace, line and op; so are a malloc that never returns (--timeout)
#     and one that calls exit(0);
#  3. a bare file name, a missing mm_realloc and an object that brings its
#     own memlib are refused with exit 2.
set -u
cc="$1"; src="$2"; work="$3"; tessera="$4"
here="$src/tests/lab"
traces="$here/traces/good/classic-small.rep"
fail=0
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
cp "$here/handout/memlib.h" "$here/handout/mm.h" "$here/handout/memlib.c" .
so() { # name source [cflags...]: a student's shared object, warnings as errors
  name="$1"; source="$2"; shift 2
  "$cc" -std=gnu11 -O2 -Wall -Wextra -Werror -shared -fPIC -I. "$@" -o "$name" "$source" || {
    echo "FAIL: could not build $name"; exit 1; }
}
expect() { # description exit-status pattern command...
  what="$1"; want="$2"; pattern="$3"; shift 3
  "$@" >out.txt 2>err.txt; got=$?
  if [ "$got" != "$want" ] || ! grep -q -- "$pattern" out.txt err.txt; then
    echo "FAIL: $what: exit $got (want $want), no '$pattern' in:"; cat out.txt err.txt; fail=1
  else
    echo "ok: $what"
  fi
}

"$src/lab/handout/make_mm.sh" --team --align 8 segregated-apart >mm.c
so mm.so mm.c
"$tessera" lab --csv --check-only --policy segregated-apart --mm ./mm.so "$traces" >both.csv 2>err.txt || {
  echo "FAIL: the generated mm.c did not run"; cat err.txt; fail=1; }
# policy,trace,valid,util,...: the two policies' rows must agree field for field after the name.
sed -n 's/^segregated-apart,//p' both.csv >builtin.txt
sed -n 's/^mm:mm.so,//p' both.csv >loaded.txt
if [ -s builtin.txt ] && cmp -s builtin.txt loaded.txt; then
  echo "ok: make_mm.sh's mm.c under --mm scores as the built-in policy ($(wc -l <loaded.txt) rows)"
else
  echo "FAIL: the loaded mm.c and the built-in policy differ:"; cat both.csv; fail=1
fi

so realloc_bug.so "$here/student/mm_broken.c"
expect "a realloc that loses a byte" 1 "mm:realloc_bug.so: .*classic-small.rep:[0-9]*: op [0-9]* (r " \
  "$tessera" lab --check-only --mm ./realloc_bug.so "$traces"
so overlap_bug.so "$here/student/mm_broken.c" -DOVERLAP
expect "a block overlapping its neighbour" 1 "overlaps the live payload of id" \
  "$tessera" lab --check-only --mm ./overlap_bug.so "$traces"
so past_break.so "$here/student/mm_broken.c" -DPAST_BREAK
expect "a write a page past the break" 139 "crashed (signal 11) while replaying .*classic-small.rep:[0-9]*: op 2 (policy mm:past_break.so)" \
  "$tessera" lab --check-only --mm ./past_break.so "$traces"
# An assert of the student's (SIGABRT) is a crash like a SIGSEGV: named by
# trace, line, op and policy (it was not: the handler left SIGABRT out).
so assert_fail.so "$here/student/mm_broken.c" -DASSERT_FAIL
expect "an assert of the student's that fails" 134 "crashed (signal 6) while replaying .*classic-small.rep:[0-9]*: op 2 (policy mm:assert_fail.so)" \
  "$tessera" lab --check-only --mm ./assert_fail.so "$traces"
# A loop that never returns: the pass's --timeout stops the run naming the
# op (it hung for ever), and exit(0) in the student's code is an invalid
# run named by op (it ended the run with status 0 and no table).
so loop.so "$here/student/mm_broken.c" -DLOOP
expect "a malloc that never returns, --timeout 1" 142 "timed out (a pass took more than 1 s, --timeout) while replaying .*classic-small.rep:[0-9]*: op 2 (policy mm:loop.so)" \
  "$tessera" lab --check-only --timeout 1 --mm ./loop.so "$traces"
so exit_call.so "$here/student/mm_broken.c" -DEXIT_CALL
expect "a malloc that calls exit(0)" 1 "the policy called exit() while replaying .*classic-small.rep:[0-9]*: op 2 (policy mm:exit_call.so)" \
  "$tessera" lab --check-only --mm ./exit_call.so "$traces"
expect "a bare file name" 2 "give a path (./mm.so)" "$tessera" lab --check-only --mm mm.so "$traces"
sed 's/^void \*mm_realloc/static void *unused_realloc/' "$here/student/mm_broken.c" >norealloc.c
so norealloc.so norealloc.c -Wno-unused-function
expect "an object without mm_realloc" 2 "does not define mm_realloc" \
  "$tessera" lab --check-only --mm ./norealloc.so "$traces"
"$cc" -std=gnu11 -O2 -shared -fPIC -I. -o ownmem.so mm.c memlib.c 2>/dev/null
expect "an object with its own memlib" 2 "defines its own mem_sbrk" \
  "$tessera" lab --check-only --mm ./ownmem.so "$traces"
exit $fail
