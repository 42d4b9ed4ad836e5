#!/bin/sh
# bench.clang_checks: the clang row verifies what the compiler wrote, not
# its exit status, and measures the allocator it names.
#  1. the translation unit (--mode source) compiles under libtessera to the
#     same assembly, byte for byte, as under the system allocator, and the
#     compiler's mallocs go through libtessera (its statistics at exit);
#  2. the row passes under libtessera and reports the compiler's figures;
#  3. a compiler that returns a wrong constant, or that exits 0 with a
#     diagnostic, fails the row (exit 3, named), never a fast run; no
#     run leaves its files in $TMPDIR.
# Exit 77 (skipped) without clang-14.
# usage: clang_checks.sh BENCH_CLANG LIBTESSERA
bench=$1 lib=$2
real=$(command -v clang-14) || { echo "SKIP: clang-14 not installed"; exit 77; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bench" --mode source --scale 0.125 > "$dir/unit.cpp" || fail "--mode source"
grep -q '^extern "C" long tessera_check_1()' "$dir/unit.cpp" || fail "no second module in the unit"
flags="-x c++ -std=c++20 -S -O1"
"$real" $flags -o "$dir/system.s" "$dir/unit.cpp" || fail "clang-14 on the system allocator"
out=$(TESSERA_SHOW_STATS=1 LD_PRELOAD="$lib" "$real" $flags -o "$dir/tessera.s" "$dir/unit.cpp" 2>&1) ||
  fail "clang-14 under libtessera: $out"
cmp "$dir/system.s" "$dir/tessera.s" || fail "the assembly differs between the system allocator and libtessera"
calls=$(echo "$out" | sed -n 's/^ *calls *malloc \([0-9]*\) .*/\1/p')
[ -n "$calls" ] || fail "no statistics from libtessera: $out"
[ "$calls" -ge 50000 ] || fail "$calls mallocs: the compiler is not allocating through libtessera"
echo "ok: same assembly, $calls mallocs through libtessera"

mkdir "$dir/tmp" && export TMPDIR="$dir/tmp"
out=$(LD_PRELOAD="$lib" "$bench" --scale 0.125 2>&1) || fail "the row under libtessera: $out"
echo "$out"
echo "$out" | grep -q '^modules=2$' || fail "not two modules"
echo "$out" | grep -qE '^override_peak_rss_kib=[1-9][0-9]*$' || fail "no peak RSS of the compiler"
echo "$out" | grep -qE '^work_s=' || fail "no work_s"

# Fake compilers on PATH: the real one, then a wrong constant in module 1's
# check (a digit prefixed), or a warning on stderr.
mkdir "$dir/wrong" "$dir/noisy"
cat > "$dir/wrong/clang-14" <<FAKE
#!/bin/sh
"$real" "\$@" || exit
while [ "\$1" != -o ]; do shift; done
sed -i '/^tessera_check_1:/,/ret/ s/movl\t\\\$/movl\t\$9/' "\$2"
FAKE
cat > "$dir/noisy/clang-14" <<FAKE
#!/bin/sh
"$real" "\$@" && echo "warning: something the row must not ignore" >&2
FAKE
chmod +x "$dir/wrong/clang-14" "$dir/noisy/clang-14"
out=$(PATH="$dir/wrong:$PATH" "$bench" --scale 0.125 2>&1); rc=$?
echo "$out"
[ $rc -eq 3 ] || fail "a wrong constant: exit $rc, expected 3"
echo "$out" | grep -q 'tessera_check_1 returns 9[0-9]*, expected ' || fail "the wrong constant is not named"
out=$(PATH="$dir/noisy:$PATH" "$bench" --scale 0.125 2>&1); rc=$?
echo "$out"
[ $rc -eq 3 ] || fail "a diagnostic: exit $rc, expected 3"
echo "$out" | grep -q 'warning: something the row must not ignore' || fail "the diagnostic is not shown"
[ -z "$(ls -A "$dir/tmp")" ] || fail "left behind in TMPDIR: $(ls -A "$dir/tmp")"
echo "ok"
