#!/usr/bin/env bash
# fuzz.sh — builds and runs the libFuzzer harnesses of tests/fuzz.
#
#   fuzz.sh build SOURCE_DIR TREE_DIR
#       Configures the project in TREE_DIR with clang-14 and
#       TESSERA_SANITIZE=fuzzer-no-link,address,undefined, TESSERA_FUZZ=ON
#       (so tests/fuzz/CMakeLists.txt defines the harness targets there), and
#       builds fuzz_api, fuzz_api_secure (the same harness on the hardened
#       build) and fuzz_trace. The main build uses gcc; this separate
#       tree is the only clang build.
#   fuzz.sh run TREE_DIR NAME SEED_DIR [SECONDS] [EXTRA libFuzzer ARGS...]
#       Runs TREE_DIR/fuzz_NAME for SECONDS (default: $TESSERA_FUZZ_SECONDS or
#       60) on a working corpus TREE_DIR/corpus-NAME seeded from SEED_DIR (the
#       committed seeds are only read). A finding fails the run and leaves the
#       input as TREE_DIR/crash-NAME-*; the executions count is printed.
# Exit 77 (CTest: skipped) with a message when clang-14 or libFuzzer is missing.
set -u
mode=${1:-}
need_clang() {
  if ! command -v clang-14 >/dev/null 2>&1; then
    echo "SKIP: clang-14 not installed (Debian: apt-get install clang-14 libclang-rt-14-dev)"
    exit 77
  fi
  local probe
  probe=$(mktemp -d)
  printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
  if ! clang-14 -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" >/dev/null 2>&1; then
    rm -rf "$probe"
    echo "SKIP: clang-14 cannot link libFuzzer (Debian: apt-get install libclang-rt-14-dev)"
    exit 77
  fi
  rm -rf "$probe"
}

case "$mode" in
  build)
    src=${2:?SOURCE_DIR}
    tree=${3:?TREE_DIR}
    need_clang
    jobs=$(nproc 2>/dev/null || echo 2)
    cmake -S "$src" -B "$tree" -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_FUZZ=ON \
      "-DTESSERA_SANITIZE=fuzzer-no-link,address,undefined" >"$tree.configure.log" 2>&1 ||
      { cat "$tree.configure.log"; echo "FAIL: configuring the fuzz build"; exit 1; }
    cmake --build "$tree" --target fuzz_api fuzz_api_secure fuzz_trace -j "$jobs" ||
      { echo "FAIL: building the fuzz harnesses"; exit 1; }
    echo "fuzz harnesses built in $tree"
    ;;
  run)
    tree=${2:?TREE_DIR}
    name=${3:?NAME}
    seeds=${4:?SEED_DIR}
    seconds=${5:-${TESSERA_FUZZ_SECONDS:-60}}
    shift 5 2>/dev/null || shift $#
    bin="$tree/fuzz_$name"
    if [ ! -x "$bin" ]; then
      need_clang
      echo "FAIL: $bin was not built (see the fuzz.build test)"
      exit 1
    fi
    corpus="$tree/corpus-$name"
    mkdir -p "$corpus"
    log="$tree/fuzz-$name.log"
    dict="$(dirname "$0")/$name.dict"   # tokens of the input language, if any
    [ -f "$dict" ] && set -- -dict="$dict" "$@"
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1} \
      "$bin" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=3072 -max_len=4096 \
      -print_final_stats=1 -artifact_prefix="$tree/crash-$name-" "$@" \
      "$corpus" "$seeds" >"$log" 2>&1
    status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ "$status" -ne 0 ]; then
      tail -60 "$log"
      echo "FAIL: fuzz_$name found a problem after ${runs:-?} executions (exit $status);" \
        "input saved as $tree/crash-$name-*"
      exit 1
    fi
    grep -E '^#[0-9]+ *DONE|^Done' "$log" | tail -2
    echo "OK: fuzz_$name: ${runs:-?} executions in ${seconds} s without a finding;" \
      "corpus $(ls "$corpus" | wc -l) inputs"
    ;;
  *)
    echo "usage: fuzz.sh build SOURCE_DIR TREE_DIR | run TREE_DIR NAME SEED_DIR [SECONDS]" >&2
    exit 2
    ;;
esac
