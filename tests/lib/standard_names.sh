#!/bin/sh
# standard_names.sh — in the drop-in libraries the standard C names (and
# glibc's __libc_* ones) are the tes_* functions under a second name, not
# copies of them: every name of a group must be defined at one address.
# Until the twenty-seventh session override.c compiled malloc's fast path
# three times and free's seven times (2 KiB of the executable segment, which
# every process maps whole: lib.fixed_cost_sizes; PERFORMANCE.md, txt27).
#
#   standard_names.sh LIBRARY...
#
# Exit 77 (skipped) when nm is not installed.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 LIBRARY..." >&2
  exit 2
fi
if ! command -v nm >/dev/null 2>&1; then
  echo "SKIP: nm is not installed (binutils)" >&2
  exit 77
fi
status=0
for lib in "$@"; do
  syms=$(nm -D --defined-only "$lib")
  while read -r group; do
    first="" first_addr=""
    for name in $group; do
      addr=$(printf '%s\n' "$syms" | awk -v n="$name" '$3 == n { print $1; exit }')
      if [ -z "$addr" ]; then
        echo "FAIL: $lib does not define $name" >&2
        status=1
      elif [ -z "$first" ]; then
        first="$name" first_addr="$addr"
      elif [ "$addr" != "$first_addr" ]; then
        echo "FAIL: $lib: $name at 0x$addr is a copy of $first (0x$first_addr), not an alias" >&2
        status=1
      fi
    done
  done <<GROUPS
tes_malloc malloc __libc_malloc
tes_free free cfree __libc_free free_sized free_aligned_sized tes_free_sized tes_free_aligned_sized
tes_calloc calloc __libc_calloc
tes_realloc realloc __libc_realloc
tes_reallocarray reallocarray __libc_reallocarray
tes_aligned_alloc aligned_alloc
tes_posix_memalign posix_memalign
tes_memalign memalign __libc_memalign
tes_valloc valloc __libc_valloc
tes_pvalloc pvalloc __libc_pvalloc
tes_usable_size malloc_usable_size
GROUPS
  [ $status -eq 0 ] && echo "$lib: every standard name is an alias of its tes_* function"
done
exit $status
