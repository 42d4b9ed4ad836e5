#!/bin/sh
# secure_exec.sh PROGRAM — TESSERA_* variables are ignored in secure
# execution. PROGRAM (secure_exec.c, linked with libtessera-secure.so) runs
# twice with TESSERA_ABORT_ON_ERROR=0, TESSERA_SHOW_STATS=1 and
# TESSERA_HEAP_REPORT=1: as built (the options apply: it survives its double
# free, statistics and the heap report are printed), then as a set-group-ID
# copy run by root, whose real and effective groups differ (AT_SECURE=1: the
# double free aborts, nothing else is printed). Skipped (77) unless root can
# make such a copy on a file system that honours set-group-ID bits.
set -u
program="$1"
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: needs root to make a set-group-ID program"
  exit 77
fi
group=$(getent group nogroup | cut -d: -f3)
[ -n "$group" ] || group=65534
dir=$(mktemp -d "${TMPDIR:-/tmp}/tessera-secure-exec.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
run() { # name program
  env TESSERA_ABORT_ON_ERROR=0 TESSERA_SHOW_STATS=1 TESSERA_HEAP_REPORT=1 "$2" >"$dir/$1.out" 2>"$dir/$1.err"
  echo $? >"$dir/$1.rc"
}
run plain "$program"
if ! grep -q "AT_SECURE=0 abort_on_error=0 show_stats=1" "$dir/plain.out" ||
   ! grep -q "still running after a double free" "$dir/plain.out" ||
   ! grep -q "tessera statistics" "$dir/plain.err" || ! grep -q "tessera heap report" "$dir/plain.err"; then
  echo "FAIL: as built, the TESSERA_* variables did not apply"; fail=1
fi
cp "$program" "$dir/setgid"
chgrp "$group" "$dir/setgid" && chmod 2755 "$dir/setgid"
run setgid "$dir/setgid"
if grep -q "AT_SECURE=0" "$dir/setgid.out"; then
  echo "SKIP: $dir is on a file system that ignores set-group-ID bits"
  exit 77
fi
if ! grep -q "AT_SECURE=1 abort_on_error=1 show_stats=0" "$dir/setgid.out"; then
  echo "FAIL: in secure execution the options were read from the environment"; fail=1
fi
if grep -q "still running" "$dir/setgid.out" || [ "$(cat "$dir/setgid.rc")" != 134 ]; then
  echo "FAIL: in secure execution TESSERA_ABORT_ON_ERROR=0 kept the process alive (exit $(cat "$dir/setgid.rc"))"; fail=1
fi
if grep -q "tessera statistics\|tessera heap report\|ignoring" "$dir/setgid.err"; then
  echo "FAIL: in secure execution the environment turned reports on"; fail=1
fi
for f in plain setgid; do
  echo "--- $f: exit $(cat "$dir/$f.rc")"; cat "$dir/$f.out"; head -3 "$dir/$f.err"
done
[ $fail = 0 ] && echo "secure execution: TESSERA_* ignored, the hardened defaults hold"
exit $fail
