#!/bin/sh
# run_tsan.sh BINARY [ARGS] — runs the ThreadSanitizer build of the thread
# stress test. Exit 77 (CTest: skipped) with a message when this machine
# cannot run TSan binaries at all (the runtime refuses the memory layout, as
# it does on some kernels with high mmap randomisation); any report from TSan
# itself is a failure.
bin=$1
shift
out=$("$bin" "$@" 2>&1)
rc=$?
if echo "$out" | grep -q -e "ThreadSanitizer: unexpected memory mapping" -e "FATAL: ThreadSanitizer" -e "failed to allocate"; then
  if command -v setarch >/dev/null 2>&1; then
    out=$(setarch "$(uname -m)" -R "$bin" "$@" 2>&1)
    rc=$?
    if ! echo "$out" | grep -q -e "ThreadSanitizer: unexpected memory mapping" -e "FATAL: ThreadSanitizer"; then
      echo "$out"
      exit $rc
    fi
  fi
  echo "$out" | head -5
  echo "SKIP: ThreadSanitizer cannot run on this machine"
  exit 77
fi
echo "$out"
exit $rc
