#!/usr/bin/env bash
# sanitize.sh — builds the project under a sanitizer in a tree of its own and
# runs a selection of its tests there.
#
#   sanitize.sh SOURCE_DIR TREE_DIR SANITIZERS INCLUDE_REGEX [EXCLUDE_REGEX]
#
# SANITIZERS goes to -DTESSERA_SANITIZE (address,undefined or thread). The
# tree is configured with the same compiler as the main build (gcc), the
# programs of the selected tests are built, then `ctest -R INCLUDE_REGEX -E EXCLUDE_REGEX` runs there.
# In a sanitizer tree libtessera is only exercised through tessera_nooverride
# (tes_* calls; see tests/sanitize/CMakeLists.txt): a malloc-replacing
# library and a sanitizer cannot both own malloc. Any sanitizer report makes
# that test fail (-fno-sanitize-recover=all, halt_on_error). Fails when the
# selection is empty, so a renamed test cannot silently drop out.
set -u
src=${1:?SOURCE_DIR}
tree=${2:?TREE_DIR}
sanitizers=${3:?SANITIZERS}
include=${4:?INCLUDE_REGEX}
exclude=${5:-^$}
jobs=$(nproc 2>/dev/null || echo 2)

cmake -S "$src" -B "$tree" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DTESSERA_SANITIZE=$sanitizers" \
  >"$tree.configure.log" 2>&1 || { cat "$tree.configure.log"; echo "FAIL: configure"; exit 1; }
selected=$(cd "$tree" && ctest -N -R "$include" -E "$exclude" | sed -n 's/^Total Tests: *//p')
if [ "${selected:-0}" -eq 0 ]; then
  echo "FAIL: no test matches -R '$include' -E '$exclude'"
  exit 1
fi
# Build only what the selected tests run: each test's program is a target of
# the same name in the tree's root (the project puts every output there), as
# the add_test lines of the tree's CTestTestfile.cmake files show.
targets=$(cd "$tree" && ctest -N -R "$include" -E "$exclude" | python3 -c '
import os, re, sys
tree = sys.argv[1]
selected = set(re.findall(r"Test +#\d+: (\S+)", sys.stdin.read()))
names = set()
for root, _, files in os.walk(tree):
    if "CTestTestfile.cmake" not in files:
        continue
    for line in open(os.path.join(root, "CTestTestfile.cmake")):
        m = re.match(r"add_test\(\[=\[(.*?)\]=\] (.*)\)$", line.strip())
        if not m or m.group(1) not in selected:
            continue
        for word in re.findall(r"\"([^\"]*)\"", m.group(2)):
            if os.path.dirname(word) == tree and not os.path.isdir(word):
                names.add(os.path.basename(word))
print(" ".join(sorted(names)))' "$(cd "$tree" && pwd)")
# Keep the words that name targets (a path such as a trace directory does not).
known=$(cmake --build "$tree" --target help 2>/dev/null | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p')
targets=$(for t in $targets; do printf '%s\n' "$known" | grep -qx "$t" && echo "$t"; done | tr '\n' ' ')
[ -n "$targets" ] || { echo "FAIL: found no programs for the selected tests"; exit 1; }
echo "building under -fsanitize=$sanitizers: $targets"
if ! cmake --build "$tree" -j "$jobs" --target $targets >"$tree.build.log" 2>&1; then
  grep -E 'error|Error' "$tree.build.log" | head -40
  echo "FAIL: building with -fsanitize=$sanitizers (log: $tree.build.log)"
  exit 1
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
echo "running $selected tests under -fsanitize=$sanitizers"
(cd "$tree" && ctest -R "$include" -E "$exclude" -j "$jobs" --output-on-failure --timeout 300) \
  >"$tree.ctest.log" 2>&1
status=$?
grep -E 'Test +#|tests passed|Skipped|\*\*\*' "$tree.ctest.log"
if [ "$status" -ne 0 ]; then
  grep -E -A30 'ERROR: (Address|Thread|Undefined|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error' \
    "$tree.ctest.log" | head -120
  echo "FAIL: sanitizer run (-fsanitize=$sanitizers) failed; full log $tree.ctest.log"
  exit 1
fi
echo "OK: $selected tests clean under -fsanitize=$sanitizers"
