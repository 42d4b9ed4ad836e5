#!/bin/sh
# bench.odd_out_dir: `tessera bench` starts its helper programs without a
# shell, so an --out directory, a TESSERA_BENCH_VENV or a TESSERA_SOURCE_DIR
# with an apostrophe, a space or shell syntax in its name is only a name:
# `lab gen` writes the generated traces there, and python3 -m venv, pip, the
# matplotlib check, bench/plot.py and git describe (machine.txt) get those
# paths intact. The cheapest run that reaches all of them: the trace row on
# generated traces (no ../shared/traces), the system allocator, one run,
# charts on. python3 is a stand-in found first in PATH that makes a stand-in
# venv whose python records its arguments, so no network and no matplotlib
# are needed.
#
#   odd_out_dir.sh TESSERA
set -u
tessera=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-odd-out.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

mkdir "$work/fakebin"
cat >"$work/fake-python" <<'PY'
#!/bin/sh
# Stand-in venv python: records what it was asked to do.
here=$(cd "$(dirname "$0")/.." && pwd)
case "$1" in
  -c) [ -e "$here/installed" ] ;;                       # import matplotlib
  -m) touch "$here/installed"; echo "pip $*" >>"$here/calls" ;;
  *) for a in "$@"; do printf '%s\n' "$a"; done >"$here/plot-args"
     for last in "$@"; do :; done
     : >"$last/time_ratios.png" ;;                       # plot.py ... DIR
esac
PY
cat >"$work/fakebin/python3" <<EOF2
#!/bin/sh
# Stand-in python3: only '-m venv DIR' is expected.
[ "\$1 \$2" = "-m venv" ] || exit 9
mkdir -p "\$3/bin" && cp "$work/fake-python" "\$3/bin/python" && echo "venv \$3" >>"\$3/calls"
EOF2
chmod +x "$work/fake-python" "$work/fakebin/python3"

venv="$work/v'env \$(touch PWNED)"
# A source tree (TESSERA_SOURCE_DIR) of that kind too: machine.txt records
# its git revision, plot.py is taken from it.
src="$work/s'rc; touch PWNED; '"
mkdir -p "$src/bench" && : >"$src/bench/plot.py"
git -C "$src" init -q && git -C "$src" add bench/plot.py &&
  git -C "$src" -c user.name=t -c user.email=t@t commit -qm t || fail "cannot make a git tree in $src"
out="$work/it's a dir'; touch PWNED; echo '"
cd "$work" || exit 1
TESSERA_TRACES_DIR=/nonexistent TESSERA_BENCH_VENV="$venv" TESSERA_SOURCE_DIR="$src" PATH="$work/fakebin:$PATH" \
  "$tessera" bench --workloads traces --allocators system --runs 1 --scale 0.01 --out "$out" >"$work/log" 2>&1
rc=$?
cat "$work/log"
[ $rc -eq 0 ] || fail "tessera bench exited $rc"
[ -z "$(find "$work" -name PWNED)" ] || fail "a shell ran part of a path: $(find "$work" -name PWNED)"
run_dir=$(cd "$out/latest" 2>/dev/null && pwd -P) || { fail "no $out/latest"; run_dir=/nonexistent; }
n=$(ls "$run_dir/generated-traces" 2>/dev/null | grep -c '\.rep$')
[ "$n" -gt 0 ] || fail "no generated traces in $run_dir/generated-traces"
grep -q '^traces-generated,system,1,1,.*,ok,' "$run_dir/results.csv" 2>/dev/null ||
  fail "no ok traces-generated row in results.csv: $(cat "$run_dir/results.csv" 2>/dev/null)"
grep -qxF "venv $venv" "$venv/calls" 2>/dev/null || fail "python3 -m venv did not get '$venv'"
grep -q "^pip -m pip install .* matplotlib$" "$venv/calls" 2>/dev/null || fail "pip install not run"
[ "$(tail -n 1 "$venv/plot-args" 2>/dev/null)" = "$run_dir" ] ||
  fail "plot.py's directory: '$(tail -n 1 "$venv/plot-args" 2>/dev/null)', want '$run_dir'"
[ "$(sed -n 1p "$venv/plot-args" 2>/dev/null)" = "$src/bench/plot.py" ] ||
  fail "plot.py: '$(sed -n 1p "$venv/plot-args" 2>/dev/null)', want '$src/bench/plot.py'"
grep -qx "commit: $(git -C "$src" rev-parse --short HEAD)" "$run_dir/machine.txt" 2>/dev/null ||
  fail "machine.txt: $(grep '^commit:' "$run_dir/machine.txt" 2>/dev/null), want $(git -C "$src" rev-parse --short HEAD)"
grep -qx 'drawn: time_ratios.png' "$run_dir/charts.txt" 2>/dev/null ||
  fail "charts.txt: $(cat "$run_dir/charts.txt" 2>/dev/null)"
echo "bench.odd_out_dir: $failures failure(s)"
[ $failures -eq 0 ]
