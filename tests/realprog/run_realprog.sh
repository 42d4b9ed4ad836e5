#!/usr/bin/env bash
# run_realprog.sh — real programs under libtessera, compared with the system
# allocator.
#
#   run_realprog.sh PROGRAM LIBTESSERA_SO [PROJECT_SOURCE_DIR]
#   PROGRAM: python | sqlite3 | git | gcc | gxx | perl | cmake_self | coreutils
#
# Each case runs the same deterministic workload twice, first on the system
# allocator (LD_PRELOAD unset), then with LD_PRELOAD=LIBTESSERA_SO, and
# compares exit status and output (stdout, or the file a case writes). The
# preload is proven to take effect once per case: the program's --version run
# with TESSERA_SHOW_STATS=1 must print libtessera's statistics. Exit status:
# 0 same results, 1 a difference (printed), 77 the program is not installed
# (skipped, with a message), 2 usage error.
set -u

program=${1:-}
lib=${2:-}
source_dir=${3:-}
if [ -z "$program" ] || [ -z "$lib" ]; then
  echo "usage: $0 python|sqlite3|git|gcc|gxx|perl|cmake_self|coreutils LIBTESSERA_SO [PROJECT_SOURCE_DIR]" >&2
  exit 2
fi
if [ ! -r "$lib" ]; then
  echo "realprog: $lib does not exist: build libtessera first" >&2
  exit 1
fi
lib=$(readlink -f "$lib")

# The real python3 executable, resolved before HOME changes (a pyenv shim
# finds its versions through HOME or PYENV_ROOT).
python_bin=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || true)

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-realprog-$program.XXXXXX")
trap 'rm -rf "$work"' EXIT
# No user configuration leaks in (git, python startup files, ...).
export HOME="$work/home"
mkdir -p "$HOME"
export LC_ALL=C
unset LD_PRELOAD TESSERA_SHOW_STATS TESSERA_HEAP_REPORT

skip() {
  echo "realprog.$program: SKIPPED: $*"
  exit 77
}

need() {
  command -v "$1" >/dev/null 2>&1 || skip "'$1' is not installed (apt-get install $2)"
}

# The preload reaches the program: its statistics appear at exit.
# REALPROG_OTHER_ALLOCATOR=1 runs the script against another allocator's .so
# (to check the workloads themselves), which prints no tessera statistics.
check_preload_active() {
  [ "${REALPROG_OTHER_ALLOCATOR:-0}" = 1 ] && return 0
  local out
  out=$(LD_PRELOAD="$lib" TESSERA_SHOW_STATS=1 "$@" 2>&1 >/dev/null)
  if ! grep -qi "malloc" <<<"$out"; then
    echo "realprog.$program: FAIL: '$*' under LD_PRELOAD=$lib printed no libtessera statistics;" \
      "the preload did not take effect. stderr was:" >&2
    head -20 <<<"$out" >&2
    exit 1
  fi
}

# compare_runs NAME CMD...: run CMD (a workload function writing its result
# to stdout) in the work directory twice, on the system allocator and on
# libtessera; compare exit status and output.
compare_runs() {
  local name=$1
  shift
  local base="$work/$name.system" tess="$work/$name.tessera"
  local rc_base rc_tess
  (cd "$work" && "$@") >"$base.out" 2>"$base.err"
  rc_base=$?
  # Every workload succeeds on a healthy machine: if it fails with the
  # system allocator, equal failures would prove nothing. Skip, loudly.
  if [ "$rc_base" -ne 0 ]; then
    tail -5 "$base.err"
    skip "[$name] fails with the system allocator (status $rc_base): comparing would prove nothing"
  fi
  (cd "$work" && LD_PRELOAD="$lib" "$@") >"$tess.out" 2>"$tess.err"
  rc_tess=$?
  local lines
  lines=$(wc -l <"$tess.out")
  if [ "$rc_base" -ne "$rc_tess" ] || ! cmp -s "$base.out" "$tess.out"; then
    echo "realprog.$program: FAIL [$name]: system allocator exit $rc_base, libtessera exit $rc_tess"
    echo "--- output difference (system vs libtessera):"
    diff "$base.out" "$tess.out" | head -40
    echo "--- libtessera stderr (last 30 lines):"
    tail -30 "$tess.err"
    return 1
  fi
  echo "realprog.$program: ok [$name]: same exit status ($rc_tess) and output ($lines lines)"
  return 0
}

# ---- cases ------------------------------------------------------------------

# python3's own regression tests: per-test results from --junit-xml, so a
# test that fails on this machine with the system allocator too (e.g. an
# environment-dependent one) is compared, not blamed.
python_tests() {
  local xml="$work/python-$RANDOM.xml"
  "$python_bin" -m test -j2 --timeout 300 --junit-xml "$xml" \
    test_dict test_list test_set test_json test_unicode test_threading test_re \
    test_collections test_sort test_deque test_bytes test_itertools test_heapq \
    test_functools >/dev/null 2>&1
  # Parse with the system allocator so the parser is not what is tested.
  env -u LD_PRELOAD "$python_bin" - "$xml" <<'EOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
results = []
for case in root.iter("testcase"):
    status = "ok"
    for child in case:
        if child.tag in ("failure", "error", "skipped"):
            status = child.tag
    results.append(f"{case.get('classname')}.{case.get('name')} {status}")
for line in sorted(results):
    print(line)
print(f"{len(results)} test cases")
EOF
}

case_python() {
  need python3 python3
  [ -n "$python_bin" ] || skip "python3 does not start"
  local testsuite
  testsuite=$("$python_bin" -c 'import sys; print("libpython%d.%d-testsuite" % sys.version_info[:2])')
  # Debian's python3 ships test.libregrtest but not the test modules.
  "$python_bin" -c "import test.libregrtest, test.test_dict, test.test_list, test.test_json" 2>/dev/null ||
    skip "python3's regression tests are not installed (apt-get install $testsuite)"
  check_preload_active "$python_bin" -c "pass"
  compare_runs python_tests python_tests || return 1
  # Same output is not enough if nothing ran.
  local cases
  cases=$(tail -1 "$work/python_tests.tessera.out" | awk '{print $1}')
  if [ "${cases:-0}" -lt 500 ]; then
    echo "realprog.python: FAIL: only ${cases:-0} test cases ran (expected thousands)"
    return 1
  fi
}

sqlite_workload() {
  rm -f work.db
  sqlite3 work.db <<'EOF'
PRAGMA cache_size = -32000;
CREATE TABLE item(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, payload BLOB, score REAL);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 120000)
INSERT INTO item SELECT x, (x * 7919) % 997, printf('item-%08d-%s', x, hex(x * x)),
       zeroblob(16 + (x * 31) % 700), ((x * 104729) % 100003) / 7.0 FROM n;
CREATE INDEX item_grp ON item(grp, score);
CREATE INDEX item_name ON item(name);
CREATE TABLE grp(id INTEGER PRIMARY KEY, label TEXT);
WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < 996)
INSERT INTO grp SELECT x, printf('group %d %s', x, substr('abcdefghij', 1, 1 + x % 10)) FROM n;
SELECT count(*), sum(length(name)), sum(length(payload)), round(sum(score), 3) FROM item;
SELECT g.label, count(*), round(avg(i.score), 4), max(i.name)
  FROM item i JOIN grp g ON g.id = i.grp GROUP BY g.id ORDER BY count(*) DESC, g.id LIMIT 20;
UPDATE item SET name = name || '-updated', payload = zeroblob(900) WHERE id % 7 = 0;
DELETE FROM item WHERE grp % 5 = 1;
SELECT count(*), sum(length(name)), sum(length(payload)) FROM item;
SELECT name FROM item ORDER BY name DESC LIMIT 5;
SELECT grp, group_concat(id, ',') FROM (SELECT grp, id FROM item WHERE grp < 3 ORDER BY id LIMIT 300) GROUP BY grp;
SELECT count(DISTINCT substr(name, 1, 12)) FROM item;
VACUUM;
PRAGMA integrity_check;
EOF
}

case_sqlite3() {
  need sqlite3 sqlite3
  check_preload_active sqlite3 --version
  compare_runs sqlite_workload sqlite_workload
}

git_workload() {
  export GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=Tessera GIT_AUTHOR_EMAIL=t@example.invalid
  export GIT_COMMITTER_NAME=Tessera GIT_COMMITTER_EMAIL=t@example.invalid
  rm -rf repo
  git init -q -b main repo && cd repo || return 1
  for round in 1 2 3 4 5 6; do
    export GIT_AUTHOR_DATE="2020-01-0${round}T12:00:00Z" GIT_COMMITTER_DATE="2020-01-0${round}T12:00:00Z"
    for i in $(seq 1 150); do
      if [ $(((i + round) % 3)) -eq 0 ] || [ "$round" -eq 1 ]; then
        mkdir -p "dir$((i % 10))"
        seq "$i" "$((i * round + 200))" | sed "s/^/round $round line /" >"dir$((i % 10))/file$i.txt"
      fi
    done
    git add -A && git commit -q -m "round $round"
  done
  git log --format='%H %s'
  git diff --stat HEAD~4 HEAD | tail -3
  git gc -q --aggressive
  git fsck --full --no-progress 2>&1
  git rev-list --count --all
  git archive HEAD | md5sum
  git grep -c "round 6 line 3" | head -5
  git blame -s dir3/file3.txt | head -5
}

case_git() {
  need git git
  check_preload_active git --version
  compare_runs git_workload git_workload
}

# A generated multi-file C or C++ program, compiled, linked and run; the
# object files are compared byte for byte too (gcc's output is deterministic).
generate_c_program() {
  local dir=$1 n=12
  mkdir -p "$dir"
  for i in $(seq 1 $n); do
    cat >"$dir/unit$i.c" <<EOF
#include <stdlib.h>
#include <string.h>
struct node$i { struct node$i *next; int value; char tag[$((8 + i))]; };
long unit$i(int count) {
  struct node$i *head = 0;
  for (int k = 0; k < count; k++) {
    struct node$i *n = malloc(sizeof *n);
    n->next = head; n->value = k * $i; memset(n->tag, 'a' + ($i % 26), sizeof n->tag);
    head = n;
  }
  long sum = 0;
  while (head) { struct node$i *next = head->next; sum += head->value + head->tag[0]; free(head); head = next; }
  return sum;
}
EOF
  done
  {
    echo "#include <stdio.h>"
    for i in $(seq 1 $n); do echo "long unit$i(int);"; done
    echo "int main(void) { long total = 0;"
    for i in $(seq 1 $n); do echo "  total += unit$i($((i * 1000)));"; done
    echo "  printf(\"total %ld\\n\", total); return 0; }"
  } >"$dir/main.c"
}

generate_cxx_program() {
  local dir=$1 n=3
  mkdir -p "$dir"
  for i in $(seq 1 $n); do
    cat >"$dir/unit$i.cpp" <<EOF
#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
std::string unit$i(int count) {
  std::map<std::string, std::vector<int>> index;
  std::unordered_map<int, std::shared_ptr<std::string>> cache;
  for (int k = 0; k < count; k++) {
    std::ostringstream key;
    key << "key" << (k * $i) % 977;
    index[key.str()].push_back(k);
    cache[k % 500] = std::make_shared<std::string>(key.str() + std::to_string(k));
  }
  std::vector<std::string> keys;
  for (auto &kv : index) keys.push_back(kv.first + ":" + std::to_string(kv.second.size()));
  std::sort(keys.begin(), keys.end());
  std::ostringstream out;
  out << "unit$i " << keys.size() << " " << keys.front() << " " << keys.back() << " " << *cache[$i];
  return out.str();
}
EOF
  done
  {
    echo "#include <iostream>"
    echo "#include <string>"
    for i in $(seq 1 $n); do echo "std::string unit$i(int);"; done
    echo "int main() {"
    for i in $(seq 1 $n); do echo "  std::cout << unit$i($((i * 5000))) << '\\n';"; done
    echo "  return 0; }"
  } >"$dir/main.cpp"
}

compile_workload() {
  local compiler=$1 ext=$2 dir=$3
  set -o pipefail
  rm -rf build && mkdir build || return 1
  for src in "$dir"/*."$ext"; do
    "$compiler" -O2 -Wall -c "$src" -o "build/$(basename "$src" ."$ext").o" || return 1
  done
  "$compiler" -O2 build/*.o -o build/prog || return 1
  ./build/prog || return 1
  (cd build && md5sum ./*.o)
}

case_gcc() {
  need gcc gcc
  check_preload_active gcc --version
  generate_c_program "$work/csrc"
  compare_runs gcc_compile compile_workload gcc c "$work/csrc"
}

case_gxx() {
  need g++ g++
  check_preload_active g++ --version
  generate_cxx_program "$work/cxxsrc"
  compare_runs gxx_compile compile_workload g++ cpp "$work/cxxsrc"
}

perl_workload() {
  perl -e '
    my %h; $h{"key$_"} = $_ * 2 for 1 .. 250000;
    my $sum = 0; $sum += $h{$_} for keys %h;
    my @keys = sort keys %h;
    print scalar(@keys), " $sum $keys[0] $keys[-1]\n";
    delete $h{"key$_"} for 1 .. 125000;
    print scalar(keys %h), "\n";
    my %groups; $groups{$_ % 1000} .= "x" x ($_ % 7) for 1 .. 200000;
    my $total = 0; $total += length $groups{$_} for keys %groups;
    print "$total\n";'
  perl -e '
    my @words = map { join "", map { chr(97 + ($_ * 7 + $_[0]) % 26) } 1 .. (3 + $_ % 9) } 1 .. 120000;
    my %count; $count{$_}++ for @words;
    my @top = (sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count)[0 .. 4];
    print join(",", map { "$_=$count{$_}" } @top), "\n";
    my $text = join " ", @words[0 .. 50000];
    my @parts = split /[aeiou]+/, $text;
    print scalar(@parts), "\n";
    (my $copy = $text) =~ s/(\w)(\w)/$2$1/g;
    print length($copy), " ", substr($copy, 0, 40), "\n";'
  perl -e '
    my @recs; push @recs, { id => $_, name => "n$_", tags => [ ($_) x ($_ % 5) ] } for 1 .. 100000;
    my @sorted = sort { $b->{id} % 977 <=> $a->{id} % 977 || $a->{id} <=> $b->{id} } @recs;
    my $tags = 0; $tags += @{ $_->{tags} } for @sorted;
    print "$sorted[0]{name} $sorted[-1]{name} $tags\n";'
}

case_perl() {
  need perl perl
  check_preload_active perl -e 1
  compare_runs perl_hashes perl_workload
}

# Configure this project and build libtessera and the lab library under
# libtessera, into a private directory, and compare the object files with a
# build by the system allocator in the same directory. The sources are
# copied first, so both builds see the same files even while someone edits
# the checkout.
cmake_self_workload() {
  rm -rf selfbuild
  cmake -S selfsrc -B selfbuild -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2 || return 3
  cmake --build selfbuild -j2 --target tessera_static tessera_lab >&2 || return 4
  (cd selfbuild && find . -name '*.o' | sort | xargs md5sum)
}

case_cmake_self() {
  need cmake cmake
  need make make
  if [ -z "$source_dir" ] || [ ! -f "$source_dir/CMakeLists.txt" ]; then
    echo "realprog.cmake_self: need the project source directory as third argument" >&2
    exit 2
  fi
  check_preload_active cmake --version
  mkdir -p "$work/selfsrc"
  tar -C "$source_dir" --exclude='./build*' --exclude=./.git --exclude=./.venv --exclude=./bench-results \
    -cf - . | tar -C "$work/selfsrc" -xf - || exit 1
  # If the project does not build even with the system allocator (someone's
  # work in progress), that is not libtessera's failure: compare_runs skips.
  compare_runs cmake_self_build cmake_self_workload
}

# coreutils and friends: the text tools a shell script runs, each a small
# allocator user of its own (sort's buffers and merge, xz's and gzip's
# windows, mawk's hashes, sed's regex), and a fork+exec-heavy shell loop.
# Input: 120,000 deterministic lines generated by awk (under the allocator
# being compared, so awk's output is compared too).
coreutils_workload() {
  awk 'BEGIN { srand(7); for (i = 1; i <= 120000; i++) { n = 1 + int(rand() * 10); line = "";
       for (j = 0; j < n; j++) line = line sprintf("w%d ", int(rand() * 50000)); print i, line } }' >big.txt
  md5sum <big.txt
  sort -S 8M -k2,2 -k1,1n big.txt | md5sum
  sort -u -t' ' -k3,3 big.txt | wc -l
  sort -n -r big.txt | head -2
  awk '{ for (i = 2; i <= NF; i++) count[$i]++ } END { n = 0; for (w in count) n++; print n }' big.txt
  sed -E 's/w([0-9]+)/<\1>/g; s/ +/,/g' big.txt | md5sum
  mkdir -p tree && split -l 4000 big.txt tree/part.
  tar -cf - --sort=name --mtime=@0 --owner=0 --group=0 tree | gzip -9n | gzip -dc | md5sum
  tar -cf - --sort=name --mtime=@0 --owner=0 --group=0 tree | xz -T2 -3 | xz -dc | md5sum
  local i
  for i in $(seq 1 200); do
    (echo "$i" | sed 's/1/one/g'; echo "x$i") | tr a-z A-Z | head -1
  done | md5sum
}

case_coreutils() {
  local tool
  for tool in sort awk sed tar gzip xz split md5sum tr head; do need "$tool" "$tool"; done
  # sort closes stderr at exit (close_stdout): its statistics appear only
  # since libtessera writes them to a copy of the starting stderr.
  check_preload_active sort --version
  compare_runs coreutils_pipeline coreutils_workload
}

case "$program" in
  python) case_python ;;
  coreutils) case_coreutils ;;
  sqlite3) case_sqlite3 ;;
  git) case_git ;;
  gcc) case_gcc ;;
  gxx) case_gxx ;;
  perl) case_perl ;;
  cmake_self) case_cmake_self ;;
  *)
    echo "run_realprog.sh: unknown program '$program'" >&2
    exit 2
    ;;
esac
