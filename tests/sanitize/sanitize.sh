#!/usr/bin/env bash
# sanitize.sh — builds the project under a sanitizer in a tree of its own and
# runs a selection of its tests there.
#
#   sanitize.sh SOURCE_DIR TREE_DIR SANITIZERS INCLUDE_REGEX [EXCLUDE_REGEX]
#
# SANITIZERS goes to -DTESSERA_SANITIZE (address,undefined or thread). The
# tree is configured with the same compiler as the main build (gcc), every
# target is built, then `ctest -R INCLUDE_REGEX -E EXCLUDE_REGEX` runs there.
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
if ! cmake --build "$tree" -j "$jobs" >"$tree.build.log" 2>&1; then
  grep -E 'error|Error' "$tree.build.log" | head -40
  echo "FAIL: building the project with -fsanitize=$sanitizers (log: $tree.build.log)"
  exit 1
fi
selected=$(cd "$tree" && ctest -N -R "$include" -E "$exclude" | sed -n 's/^Total Tests: *//p')
if [ "${selected:-0}" -eq 0 ]; then
  echo "FAIL: no test matches -R '$include' -E '$exclude'"
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
