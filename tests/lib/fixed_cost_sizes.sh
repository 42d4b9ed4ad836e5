#!/bin/sh
# fixed_cost_sizes.sh — what every process that preloads LIBRARY pays before
# it allocates, in sizes (not a timing): the kernel maps a file's pages 64
# KiB around each fault, so the whole executable segment is resident in
# every program, and every dynamic relocation is processed (and each one in
# writable data dirties its page) at every start.
#
#   fixed_cost_sizes.sh LIBRARY MAX_TEXT_BYTES MAX_RELOCATIONS
#
# Fails when the executable LOAD segment is larger than MAX_TEXT_BYTES or
# the library has more than MAX_RELOCATIONS dynamic relocations. Exit 77
# (skipped) when readelf is not installed.
set -eu
if [ $# -ne 3 ]; then
  echo "usage: $0 LIBRARY MAX_TEXT_BYTES MAX_RELOCATIONS" >&2
  exit 2
fi
lib="$1" max_text="$2" max_relocs="$3"
if ! command -v readelf >/dev/null 2>&1; then
  echo "SKIP: readelf is not installed (binutils)" >&2
  exit 77
fi
# LOAD  offset vaddr paddr filesz memsz flags align: the one with E.
text=$(printf '%d' "$(readelf -lW "$lib" | awk '$1 == "LOAD" && $0 ~ / R E / { print $5; exit }')")
relocs=$(readelf -rW "$lib" | grep -c '^[0-9a-f]\{16\} ' || true)
echo "$lib: executable segment $text bytes (budget $max_text), $relocs dynamic relocations (budget $max_relocs)"
status=0
if [ "$text" -gt "$max_text" ]; then
  echo "FAIL: executable segment $text bytes, budget $max_text" >&2
  status=1
fi
if [ "$relocs" -gt "$max_relocs" ]; then
  echo "FAIL: $relocs dynamic relocations, budget $max_relocs" >&2
  status=1
fi
exit $status
