#!/bin/sh
# tessera bench --from DIR: rebuilding a report from a results directory.
#   from_report.sh TESSERA out      --out OUT writes the rebuilt report (and
#                                   copies of the raw files) into OUT and leaves
#                                   DIR byte for byte as it was; an OUT holding
#                                   another run's results is refused
#   from_report.sh TESSERA machine  the report names the machine that measured
#                                   (machine.txt), not the one that re-reports
#   from_report.sh TESSERA notes    the notes of the run (skipped allocators,
#                                   rows that did not run) survive a rebuild
#   from_report.sh TESSERA atomic   a rebuild that cannot write its reports
#                                   leaves the ones there intact
#   from_report.sh TESSERA misnamed --from given results.csv itself, or the
#                                   root of the runs: says what to give
#   from_report.sh TESSERA failed_chart  a rebuild whose drawing fails does
#                                   not link the charts of an earlier one,
#                                   nor does a --no-charts rebuild after it
#   from_report.sh TESSERA uneven   records of an interrupted run or of runs
#                                   put together get a note in the report
#   from_report.sh TESSERA stale_chart  a --no-charts rebuild under another
#                                   baseline or metric leaves the time-ratio
#                                   chart drawn for the old one out of its report
# The results directory is written by hand: two allocators, two runs.
set -u
tessera=$1
mode=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

dir="$tmp/run dir"
mkdir "$dir"
cat >"$dir/results.csv" <<'EOF'
workload,allocator,threads,run,wall_s,cpu_s,peak_rss_kib,status,user_s,sys_s,work_s,extra
single,system,1,1,0.200000,0.200000,2000,ok,0.200000,0.000000,0.190000,
single,tessera,1,1,0.100000,0.100000,1500,ok,0.100000,0.000000,0.090000,
single,system,1,2,0.220000,0.220000,2100,ok,0.220000,0.000000,0.210000,
single,tessera,1,2,0.110000,0.110000,1600,ok,0.110000,0.000000,0.100000,
EOF
cat >"$dir/machine.txt" <<'EOF'
date: 2026-11-22T04:56:12Z
command: tessera bench --runs 2 --workloads single
cpu: Measuring CPU 9000
summary: Measuring CPU 9000, 64 cores, 512.0 GiB, Linux 9.9.9, glibc 9.99
EOF
# The report as the run wrote it, with the run's notes.
cat >"$dir/report.md" <<'EOF'
# Tessera allocator comparison

- Command: `tessera bench --runs 2 --workloads single`
- Baseline: system

## Notes

- allocator mimalloc: /usr/lib/x86_64-linux-gnu/libmimalloc.so.2 not found; apt-get install libmimalloc2.0
- instructions: no hardware instruction counter here (perf events), so none recorded

## Method

Every workload is a separate process.
EOF
echo '{"original": true}' >"$dir/results.json"
echo 'workload,allocator,threads,run,t_s,rss_kib' >"$dir/rss_series.csv"

case $mode in
out)
  (cd "$dir" && md5sum -- * >"$tmp/before.md5") || fail "md5sum"
  out="$tmp/vs tessera"
  "$tessera" bench --from "$dir" --out "$out" --baseline tessera --no-charts || fail "--from --out exited $?"
  (cd "$dir" && md5sum -c --quiet "$tmp/before.md5") || fail "--from --out changed $dir"
  for f in results.csv machine.txt rss_series.csv report.md results.json charts.txt; do
    test -f "$out/$f" || fail "$out/$f missing"
  done
  cmp -s "$dir/results.csv" "$out/results.csv" || fail "results.csv not copied as it is"
  grep -q '^- Baseline: tessera$' "$out/report.md" || fail "the report in OUT is not against tessera"
  grep -q '"baseline": "tessera"' "$out/results.json" || fail "results.json in OUT is not against tessera"
  # The same command again (OUT holds the same results): fine.
  "$tessera" bench --from "$dir" --out "$out" --metric cpu --no-charts >/dev/null || fail "second rebuild into OUT"
  # OUT can itself be rebuilt.
  "$tessera" bench --from "$out" --no-charts >/dev/null || fail "--from OUT"
  # An OUT holding the results of another run is refused; nothing written.
  other="$tmp/other"
  mkdir "$other"
  head -n 3 "$dir/results.csv" >"$other/results.csv"
  (cd "$other" && md5sum -- * >"$tmp/other.md5")
  msg=$("$tessera" bench --from "$dir" --out "$other" --no-charts 2>&1)
  rc=$?
  echo "$msg"
  test $rc -eq 2 || fail "--out over another run's results exited $rc, not 2"
  echo "$msg" | grep -qF "holds the results of another run" || fail "no message for another run's OUT"
  (cd "$other" && md5sum -c --quiet "$tmp/other.md5") && test "$(ls "$other")" = results.csv ||
    fail "another run's OUT was written to"
  # An unknown baseline writes nothing, OUT not even created.
  "$tessera" bench --from "$dir" --out "$tmp/never" --baseline nope --no-charts 2>/dev/null
  test $? -eq 2 && test ! -e "$tmp/never" || fail "--baseline nope created OUT"
  # OUT that is DIR itself: the rebuild in place, as without --out.
  "$tessera" bench --from "$dir" --out "$dir/." --baseline tessera --no-charts >/dev/null || fail "--out DIR"
  grep -q '^- Baseline: tessera$' "$dir/report.md" || fail "--out DIR did not rebuild in place"
  ;;
machine)
  "$tessera" bench --from "$dir" --no-charts >/dev/null || fail "--from exited $?"
  grep -qF -- '- Machine: Measuring CPU 9000, 64 cores, 512.0 GiB, Linux 9.9.9, glibc 9.99' "$dir/report.md" ||
    fail "report.md does not name the measuring machine: $(grep Machine "$dir/report.md")"
  grep -qF '"machine": "Measuring CPU 9000, 64 cores' "$dir/results.json" || fail "results.json machine"
  grep -v '^summary:' "$dir/machine.txt" >"$tmp/m" && mv "$tmp/m" "$dir/machine.txt"
  "$tessera" bench --from "$dir" --no-charts >/dev/null || fail "--from without summary exited $?"
  grep -qF -- '- Machine: unknown (not in ' "$dir/report.md" ||
    fail "without a summary the report names a machine: $(grep Machine "$dir/report.md")"
  ;;
notes)
  check_notes() {
    grep -qF -- '- allocator mimalloc: /usr/lib/x86_64-linux-gnu/libmimalloc.so.2 not found; apt-get install libmimalloc2.0' \
      "$1/report.md" || fail "the run's note on mimalloc was lost in $1/report.md"
    grep -qF -- '- instructions: no hardware instruction counter' "$1/report.md" || fail "instructions note lost"
    grep -qF 'allocator mimalloc: /usr/lib' "$1/results.json" || fail "notes lost in $1/results.json"
    test "$(grep -c '^- report rebuilt from results.csv by: ' "$1/report.md")" -eq 1 ||
      fail "not exactly one rebuild note in $1/report.md"
  }
  "$tessera" bench --from "$dir" --out "$tmp/o1" --baseline tessera --no-charts >/dev/null || fail "--from exited $?"
  check_notes "$tmp/o1"
  # Rebuilt again from the rebuilt report: the notes carried once more, and
  # the earlier rebuild's own note replaced, not piled up.
  "$tessera" bench --from "$tmp/o1" --no-charts >/dev/null || fail "second --from exited $?"
  check_notes "$tmp/o1"
  ;;
atomic)
  # A rebuild whose write fails half-way (a file size limit here, a full
  # disk alike) exits 1 and leaves the reports that were there intact: it
  # left a truncated results.json beside an already rewritten report.md.
  (cd "$dir" && md5sum -- report.md results.json >"$tmp/before.md5")
  ( trap '' XFSZ; ulimit -f 2; "$tessera" bench --from "$dir" --baseline tessera --no-charts >/dev/null 2>"$tmp/err" )
  rc=$?
  cat "$tmp/err"
  test $rc -eq 1 || fail "a failed write exited $rc, not 1"
  grep -qF "could not write the reports in $dir: File too large" "$tmp/err" || fail "no message naming the error"
  (cd "$dir" && md5sum -c --quiet "$tmp/before.md5") || fail "the reports were damaged by a failed rebuild"
  test -z "$(ls "$dir" | grep tmp)" || fail "temporary files left: $(ls "$dir")"
  "$tessera" bench --from "$dir" --baseline tessera --no-charts >/dev/null || fail "rebuild without a limit"
  grep -q '^- Baseline: tessera$' "$dir/report.md" || fail "report.md not rebuilt"
  ;;
misnamed)
  # The results.csv file itself, or the root of the runs: a message that
  # says what to give (it was "DIR/results.csv: cannot open: Not a
  # directory" / "No such file or directory").
  msg=$("$tessera" bench --from "$dir/results.csv" --no-charts 2>&1)
  test $? -eq 1 || fail "--from FILE exited other than 1"
  echo "$msg" | grep -qF "tessera bench: --from wants the results directory, and $dir/results.csv is a file (give the directory it is in)" ||
    fail "--from FILE: $msg"
  root="$tmp/root"
  mkdir "$root" && mv "$dir" "$root/20261122-045612" && ln -s 20261122-045612 "$root/latest"
  msg=$("$tessera" bench --from "$root" --no-charts 2>&1)
  test $? -eq 1 || fail "--from ROOT exited other than 1"
  echo "$msg" | grep -qF "tessera bench: $root has no results.csv: it is the root of the runs (--out); the newest run is $root/latest" ||
    fail "--from ROOT: $msg"
  "$tessera" bench --from "$root/latest" --no-charts >/dev/null || fail "--from ROOT/latest"
  ;;
stale_chart)
  # Charts drawn against system; a --no-charts rebuild against tessera
  # keeps them but leaves the time-ratio chart out of its report (it was
  # shown, "Time relative to system" in a report against tessera), and one
  # against system again shows it.
  echo png >"$dir/time_ratios.png"
  echo png >"$dir/peak_rss.png"
  printf 'drawn: time_ratios.png\ndrawn: peak_rss.png\nbaseline: system\nmetric: work\n' >"$dir/charts.txt"
  "$tessera" bench --from "$dir" --baseline tessera --no-charts >/dev/null || fail "--from exited $?"
  ! grep -qF '![time_ratios.png]' "$dir/report.md" || fail "the chart against system is shown in a report against tessera"
  grep -qF '![peak_rss.png](peak_rss.png)' "$dir/report.md" || fail "peak_rss.png left out"
  grep -qF -- '- charts: time_ratios.png (drawn against system, work time) is not shown: this report is against tessera, work time' \
    "$dir/report.md" || fail "no note on the chart left out"
  "$tessera" bench --from "$dir" --metric cpu --no-charts >/dev/null || fail "--from --metric cpu exited $?"
  ! grep -qF '![time_ratios.png]' "$dir/report.md" || fail "the work-time chart is shown in a cpu-time report"
  test "$(grep -c -- '- charts: time_ratios.png' "$dir/report.md")" -eq 1 || fail "the chart note piled up"
  "$tessera" bench --from "$dir" --no-charts >/dev/null || fail "--from exited $?"
  grep -qF '![time_ratios.png](time_ratios.png)' "$dir/report.md" || fail "the chart against system is not shown"
  ! grep -qF -- '- charts: ' "$dir/report.md" || fail "a chart note is left in a report the chart fits"
  ;;
failed_chart)
  # A rebuild that asks for charts and whose drawing fails (here a Python
  # whose plot.py run exits 3) leaves out the chart files of an earlier
  # drawing, with a note: they were linked, showing the earlier baseline.
  mkdir -p "$tmp/venv/bin"
  printf '#!/bin/sh\ncase "$1" in -c) exit 0;; *) exit 3;; esac\n' >"$tmp/venv/bin/python"
  chmod +x "$tmp/venv/bin/python"
  echo png >"$dir/time_ratios.png"
  echo png >"$dir/peak_rss.png"
  printf 'drawn: time_ratios.png\ndrawn: peak_rss.png\nbaseline: system\nmetric: work\n' >"$dir/charts.txt"
  TESSERA_BENCH_VENV="$tmp/venv" "$tessera" bench --from "$dir" --baseline tessera >/dev/null || fail "--from exited $?"
  grep -qF 'failed: plot.py exited with 3' "$dir/charts.txt" || fail "charts.txt: $(cat "$dir/charts.txt")"
  ! grep -qF '.png](' "$dir/report.md" || fail "a chart of the earlier drawing is linked: $(grep -F '.png](' "$dir/report.md")"
  grep -qF -- '- charts: peak_rss.png is not shown: it is from an earlier drawing, and this one was not made' \
    "$dir/report.md" || fail "no note on the charts left out"
  # A --no-charts rebuild after it leaves them out too: charts.txt now says
  # the drawing failed, not which baseline the files were drawn against, and
  # they were linked again (time_ratios.png against system in a report
  # against tessera).
  "$tessera" bench --from "$dir" --baseline tessera --no-charts >/dev/null || fail "--from --no-charts exited $?"
  ! grep -qF '.png](' "$dir/report.md" || fail "--no-charts after the failed drawing links: $(grep -F '.png](' "$dir/report.md")"
  grep -qF -- '- charts: time_ratios.png is not shown: it is from an earlier drawing, and the last one asked for was not made' \
    "$dir/report.md" || fail "no note on the charts left out by --no-charts"
  ;;
uneven)
  # Records that are not one complete run are said to be so in the report:
  # they were taken as they came, silently.
  "$tessera" bench --from "$dir" --no-charts >/dev/null || fail "--from exited $?"
  ! grep -qF -- '- records: ' "$dir/report.md" || fail "a note on the records of a complete run"
  # An interrupted run: system ran a third time, tessera did not.
  echo 'single,system,1,3,0.210000,0.210000,2050,ok,0.210000,0.000000,0.200000,' >>"$dir/results.csv"
  "$tessera" bench --from "$dir" --no-charts >/dev/null || fail "--from exited $?"
  grep -qF -- "- records: cells have 2 to 3 runs (an interrupted run?)" "$dir/report.md" || fail "no note on uneven runs"
  "$tessera" bench --from "$dir" --no-charts >/dev/null || fail "--from exited $?"
  test "$(grep -c -- '- records: ' "$dir/report.md")" -eq 1 || fail "the records note piled up over rebuilds"
  # Two results files put together: the same runs twice.
  tail -n +2 "$dir/results.csv" >>"$dir/results.csv.more" && cat "$dir/results.csv.more" >>"$dir/results.csv"
  "$tessera" bench --from "$dir" --no-charts >/dev/null || fail "--from exited $?"
  grep -qF -- "- records: 5 records repeat the workload, allocator, threads and run of another (first: single under system, 1 threads, run 1)" \
    "$dir/report.md" || fail "no note on repeated records: $(grep records: "$dir/report.md")"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo ok
