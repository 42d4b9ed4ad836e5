#!/usr/bin/env bash
# defer.sh — valgrind memcheck and AddressSanitizer see heap bugs in a
# program that runs on libtessera as they would without it.
#
#   defer.sh DEFER_BUGS DEFER_BUGS_ASAN|- LIBTESSERA LIBTESSERA_SECURE
#
# Neither tool needs anything from the allocator: memcheck replaces malloc in
# every loaded object by default (its "somalloc" soname synonym), and a
# program built with -fsanitize=address gets ASan's malloc, whose runtime
# comes first in the link order, ahead of a linked libtessera. This checks
# that it stays so (a future override mechanism that either tool could not
# see through, such as malloc hooks or an IFUNC, would fail here):
#   1. memcheck, libtessera.so and libtessera-secure.so preloaded: each of
#      overflow, use after free, uninitialised read, double free and leak is
#      reported; malloc_usable_size(malloc(20)) is memcheck's 20; a clean
#      program (threads, fork, every size range) has no error;
#   2. memcheck with --soname-synonyms=somalloc=nouserdefined, so that
#      libtessera itself serves (malloc_usable_size says its 32): memcheck
#      finds nothing in the allocator's own code on the clean program;
#   3. the ASan build of the same program, linked with libtessera.so
#      (DEFER_BUGS_ASAN, "-" when the compiler has no ASan): ASan reports
#      each bug and its own usable size.
# Skips (77) when valgrind is missing and there is no ASan build either.
set -u
bugs=${1:?usage: defer.sh DEFER_BUGS DEFER_BUGS_ASAN|- LIBTESSERA LIBTESSERA_SECURE}
asan=${2:?} lib=${3:?} secure=${4:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
have_valgrind=1
command -v valgrind >/dev/null 2>&1 || have_valgrind=0
[ "$have_valgrind" = 1 ] || [ "$asan" != - ] || { echo "SKIP: neither valgrind nor an ASan build"; exit 77; }
checks=0

# expect NAME WANT_STATUS PATTERN CMD... : run, then demand the status and the pattern in its output.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 3
  "$@" >"$work/out" 2>&1
  local status=$?
  [ "$status" -eq "$want" ] || { cat "$work/out"; fail "$name: status $status, want $want"; }
  if [ -n "$pattern" ]; then grep -qE "$pattern" "$work/out" || { cat "$work/out"; fail "$name: no '$pattern'"; }; fi
  checks=$((checks + 1))
}

if [ "$have_valgrind" = 1 ]; then
  # vg LIB ARGS...: memcheck on the program with LIB preloaded.
  vg() {
    local l=$1
    shift
    env LD_PRELOAD="$l" valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 "$@"
  }
  for l in "$lib" "$secure"; do
    n=$(basename "$l")
    expect "memcheck/$n overflow" 99 'Invalid write of size 1' vg "$l" "$bugs" overflow
    expect "memcheck/$n uaf" 99 'Invalid read of size 8' vg "$l" "$bugs" uaf
    expect "memcheck/$n uninit" 99 'depends on uninitialised value' vg "$l" "$bugs" uninit
    expect "memcheck/$n double_free" 99 'Invalid free' vg "$l" "$bugs" double_free
    expect "memcheck/$n leak" 99 'definitely lost' vg "$l" "$bugs" leak
    expect "memcheck/$n usable" 0 '^usable=20$' vg "$l" "$bugs" usable
    expect "memcheck/$n clean" 0 '' vg "$l" "$bugs" clean
  done
  own=--soname-synonyms=somalloc=nouserdefined
  expect "memcheck/own allocator usable" 0 '^usable=32$' vg "$lib" "$own" "$bugs" usable
  for l in "$lib" "$secure"; do
    expect "memcheck/own allocator $(basename "$l") clean" 0 '' vg "$l" "$own" "$bugs" clean
  done
else
  echo "note: valgrind not installed, memcheck part skipped"
fi

if [ "$asan" != - ]; then
  export ASAN_OPTIONS=detect_leaks=1
  expect "asan overflow" 1 'AddressSanitizer: heap-buffer-overflow' "$asan" overflow
  expect "asan uaf" 1 'AddressSanitizer: heap-use-after-free' "$asan" uaf
  expect "asan double_free" 1 'AddressSanitizer: attempting double-free' "$asan" double_free
  expect "asan leak" 1 'LeakSanitizer: detected memory leaks' "$asan" leak
  expect "asan usable" 0 '^usable=20$' "$asan" usable
  expect "asan clean" 0 '' "$asan" clean
  ldd "$asan" | grep -q "$(basename "$lib")" || fail "the ASan build is not linked with $(basename "$lib")"
else
  echo "note: no ASan build, ASan part skipped"
fi
echo "OK: $checks checks: memcheck and ASan report heap bugs with libtessera preloaded or linked, and memcheck finds nothing in libtessera's own code"
