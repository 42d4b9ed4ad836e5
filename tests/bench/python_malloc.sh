#!/bin/sh
# bench.python_malloc: the python row's interpreter allocates its objects
# with malloc (PYTHONMALLOC=malloc honoured), as the workload says. Until
# 2026-11-24 it ran python3 -I, which ignores every PYTHON* variable: the
# allocator saw about 2,300 calls a round, pymalloc the rest. One round
# (--scale 0.01) makes some 770,000 mallocs through libtessera now.
# A json.py in the working directory and on PYTHONPATH must not be
# imported (the isolation -I gave). Exit 77 (skipped) without python3.
# usage: python_malloc.sh BENCH_PYTHON LIBTESSERA
bench=$1 lib=$2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
printf 'raise SystemExit("the json.py of the working directory was imported")\n' > "$dir/json.py"
out=$(cd "$dir" && PYTHONPATH="$dir" PYTHONMALLOC=pymalloc TESSERA_SHOW_STATS=1 LD_PRELOAD="$lib" "$bench" --scale 0.01 2>&1)
rc=$?
echo "$out"
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
echo "$out" | grep -q '^checksum=' || { echo "FAIL: no checksum"; exit 1; }
calls=$(echo "$out" | sed -n 's/^ *calls *malloc \([0-9]*\) .*/\1/p')
[ -n "$calls" ] || { echo "FAIL: no statistics"; exit 1; }
[ "$calls" -ge 100000 ] || { echo "FAIL: $calls mallocs, the interpreter is not allocating through malloc"; exit 1; }
echo "ok: $calls mallocs"
