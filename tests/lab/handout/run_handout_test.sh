#!/bin/sh
# The handout drop-in test: generate mm.c for POLICY with lab/handout/make_mm.sh,
# build it against the mock classic handout in this folder (memlib.h with
# mem_sbrk(int), mm.h with team_t) exactly as a handout Makefile would (only
# mm.c, memlib.c and the driver), with warnings as errors, and run the
# mdriver-like check.
#   run_handout_test.sh CC SOURCE_DIR WORK_DIR POLICY [ALIGN]
set -eu
cc="$1"; src="$2"; work="$3"; policy="$4"; align="${5:-8}"
here="$src/tests/lab/handout"
rm -rf "$work"
mkdir -p "$work"
cp "$here/memlib.h" "$here/memlib.c" "$here/mm.h" "$here/mdriver_mini.c" "$work/"
"$src/lab/handout/make_mm.sh" --team --align "$align" "$policy" > "$work/mm.c"
cd "$work"
"$cc" -std=gnu11 -O2 -Wall -Wextra -Werror -DALIGNMENT="$align" \
  -o mdriver_mini mdriver_mini.c mm.c memlib.c
./mdriver_mini
