#!/bin/sh
# malloc_prefetch.sh LIBRARY — the hardened malloc's fast path (the
# instructions of `malloc` up to its first `ret`: the small pop) prefetches
# the page's next free block, in at most 26 instructions (the session
# start's count: the prefetch took the place of the link check's register
# copy). That block was freed (or carved) long before
# it is handed out, so the next malloc's read of its link missed the cache
# (46% of the hardened malloc's samples in bench_python, twenty-fifth
# session, hsm25: docs/RELIABILITY.md). A prefetch saves no instruction
# and no simulator models it, so the test reads the machine code. Skipped
# (77) off x86-64 or without binutils.
set -u
lib="$1"
if [ "$(uname -m)" != x86_64 ] || ! command -v objdump >/dev/null 2>&1 || ! command -v nm >/dev/null 2>&1; then
  echo "SKIP: needs x86-64 and binutils (objdump, nm)"
  exit 77
fi
addr=$(nm -D --defined-only "$lib" | awk '$3 == "malloc" { print $1; exit }')
if [ -z "$addr" ]; then
  echo "FAIL: no malloc in $lib"
  exit 1
fi
start=$((0x$addr))
code=$(objdump -d --no-show-raw-insn --start-address="$start" --stop-address=$((start + 512)) "$lib" |
  awk '/^ *[0-9a-f]+:/ { print; if ($2 ~ /^ret/) exit }')
count=$(printf '%s\n' "$code" | grep -c .)
if printf '%s\n' "$code" | grep -q 'prefetch' && [ "$count" -le 26 ]; then
  echo "malloc's fast path prefetches the next free block ($count instructions to its first ret)"
  exit 0
fi
printf '%s\n' "$code"
echo "FAIL: no prefetch on malloc's fast path, or more than 26 instructions to its first ret ($count)"
exit 1
