# Driver tests beyond the unit tests (included by tests/lab/CMakeLists.txt).
#  - lab.driver_cli runs the built `tessera lab` (so it depends on it);
#  - lab.gen_traces writes generated traces into the build dir, and
#    lab.generated_compare replays them on every policy with the checker on;
#  - lab.demo runs the default demo (generated in memory) with timing;
#  - lab.gen_largemem + lab.generated_largemem: the same with the generated
#    multi-GiB trace (the wide block format);
#  - lab.shared_classic / lab.shared_cmu64 (/ _largemem) replay every policy
#    over the shared trace sets with the checker on, and skip (77) when
#    ../shared/traces is absent: those files are other people's data and never
#    in the repository.
if(TARGET lab_test_driver_cli AND TARGET tessera)
  add_dependencies(lab_test_driver_cli tessera)
endif()
# ... and checks the options of a bench/fit program.
if(TARGET lab_test_driver_cli AND TARGET fit_equal)
  add_dependencies(lab_test_driver_cli fit_equal)
endif()

set(LAB_GENERATED_TRACES ${CMAKE_BINARY_DIR}/lab-traces)
add_test(NAME lab.gen_traces
  COMMAND tessera lab gen all --seed 7 --ops 3000 -o ${LAB_GENERATED_TRACES})
set_tests_properties(lab.gen_traces PROPERTIES FIXTURES_SETUP lab_generated_traces)
add_test(NAME lab.generated_compare
  COMMAND tessera lab --compare --check --check-only ${LAB_GENERATED_TRACES})
set_tests_properties(lab.generated_compare PROPERTIES
  FIXTURES_REQUIRED lab_generated_traces TIMEOUT 300)

# `tessera lab --mm`: a student's mm.c (a shared object) graded as a policy.
add_test(NAME lab.student_mm
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/student_mm.sh ${CMAKE_C_COMPILER} ${PROJECT_SOURCE_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/student_mm $<TARGET_FILE:tessera>)
set_tests_properties(lab.student_mm PROPERTIES TIMEOUT 120)

# On a terminal (script(1) gives one) a progress line names the trace being
# replayed; into a file, nothing of it.
add_test(NAME lab.progress
  COMMAND sh -c "command -v script >/dev/null || { echo 'SKIP: no script(1)'; exit 77; }
    tty=$(script -qc \"$1 lab --check-only --policy implicit-first $2\" /dev/null) &&
    echo \"$tty\" | grep -q 'implicit-first: trace 1 of 1, classic-small.rep ...' &&
    $1 lab --check-only --policy implicit-first $2 2>err.txt >/dev/null && ! grep -q 'trace 1 of 1' err.txt"
    sh $<TARGET_FILE:tessera> ${CMAKE_CURRENT_SOURCE_DIR}/traces/good/classic-small.rep)
set_tests_properties(lab.progress PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)

add_test(NAME lab.demo COMMAND tessera lab --runs 1)
set_tests_properties(lab.demo PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION "Perf index = ")

# Every policy, every shared trace, no timed runs, the policy's checker after
# every op on short traces and LAB_SHARED_CHECK_BUDGET times, evenly spaced,
# on long ones (plus once at the end of each trace): a checker is O(heap), so
# running it after every op of the 100k-op traces takes far too long for CI
# (every 16th op: 4 CPU-minutes for the 64-bit set); the driver's own checks
# (alignment, overlap, contents, ...) still run on every op.
set(LAB_SHARED_TRACES ${PROJECT_SOURCE_DIR}/../shared/traces)
set(LAB_SHARED_CHECK_BUDGET 1000 CACHE STRING "lab.shared_*: heap checker runs per trace (at most)")
set(LAB_SHARED_SKIP "skipped: the shared trace sets are absent (they are read at run time, never committed)")
add_test(NAME lab.shared_classic
  COMMAND sh -c "[ -d \"$1\" ] || { echo '${LAB_SHARED_SKIP}'; exit 77; }; exec \"$0\" lab --compare --check --check-budget ${LAB_SHARED_CHECK_BUDGET} --check-only \"$1\""
          $<TARGET_FILE:tessera> ${LAB_SHARED_TRACES}/cmu-classic)
add_test(NAME lab.shared_cmu64
  COMMAND sh -c "[ -d \"$1\" ] || { echo '${LAB_SHARED_SKIP}'; exit 77; }; exec \"$0\" lab --compare --check --check-budget ${LAB_SHARED_CHECK_BUDGET} --check-only \"$1\""
          $<TARGET_FILE:tessera> ${LAB_SHARED_TRACES}/cmu15213-64bit)
# syn-largemem-short asks for blocks of 4 to 36.5 GB (peak live 38.65 GB):
# beyond the narrow block format, so every policy must open its wide region
# (docs/LAB.md) and replay it validly with the checker after every op. Exit
# status 0 and one valid row per listed policy. (lab.shared_cmu64 covers it
# too; this names the case.)
add_test(NAME lab.shared_cmu64_largemem
  COMMAND sh -c "t=\"$1/syn-largemem-short.rep\"; [ -f \"$t\" ] || { echo '${LAB_SHARED_SKIP}'; exit 77; }
    n=$(\"$0\" lab --list-policies | grep -v '^ *system ' | grep -c .); out=$(\"$0\" lab --compare --check --check-only \"$t\" 2>&1); rc=$?
    echo \"$out\" | tail -25
    [ $rc -eq 0 ] || { echo \"expected exit 0, got $rc\"; exit 1; }
    k=$(echo \"$out\" | grep -c '^[a-z0-9-]*  *1/1  ')
    [ \"$k\" -eq \"$n\" ] || { echo \"expected $n valid policies, got $k\"; exit 1; }"
          $<TARGET_FILE:tessera> ${LAB_SHARED_TRACES}/cmu15213-64bit)
set_tests_properties(lab.shared_classic lab.shared_cmu64 lab.shared_cmu64_largemem PROPERTIES
  SKIP_RETURN_CODE 77 TIMEOUT 1500)

# The project's own multi-GiB trace (the shared sets may be absent in CI):
# `tessera lab gen largemem` (blocks of 3 to 40 GiB among small ones, adjacent
# huge blocks coalesced, a realloc past 4 GiB), replayed on every policy at
# both alignments with the checker after every op. Its heap is about 112 GB
# of address space (MAP_NORESERVE; the run touches a few MB), so it asks for
# a 256 GiB cap and skips (77) on a machine that refuses to reserve that.
set(LAB_LARGEMEM_TRACE ${CMAKE_BINARY_DIR}/lab-largemem.rep)
add_test(NAME lab.gen_largemem
  COMMAND tessera lab gen largemem --seed 7 -o ${LAB_LARGEMEM_TRACE})
set_tests_properties(lab.gen_largemem PROPERTIES FIXTURES_SETUP lab_largemem_trace)
add_test(NAME lab.generated_largemem
  COMMAND sh -c "n=$(\"$0\" lab --list-policies | grep -v '^ *system ' | grep -c .)
    for a in 8 16; do
      out=$(\"$0\" lab --compare --check --check-only --heap-cap 256G --align $a \"$1\" 2>&1); rc=$?
      case \"$out\" in *'cannot reserve'*) echo \"skipped: $out\"; exit 77 ;; esac
      echo \"$out\" | tail -22
      [ $rc -eq 0 ] || { echo \"align $a: expected exit 0, got $rc\"; exit 1; }
      k=$(echo \"$out\" | grep -c '^[a-z0-9-]*  *1/1  ')
      [ \"$k\" -eq \"$n\" ] || { echo \"align $a: expected $n valid policies, got $k\"; exit 1; }
    done"
          $<TARGET_FILE:tessera> ${LAB_LARGEMEM_TRACE})
set_tests_properties(lab.generated_largemem PROPERTIES
  FIXTURES_REQUIRED lab_largemem_trace SKIP_RETURN_CODE 77 TIMEOUT 300)

# `lab gen` whose write fails half-way (here a file size limit; a full disk
# alike) keeps the file that was there: it left a truncated trace in its
# place. No temporary file is left behind, and -o to a device still works.
add_test(NAME lab.gen_failed_write_keeps_file
  COMMAND sh -c "d=$(mktemp -d) && trap 'rm -rf \"$d\"' EXIT && cd \"$d\" &&
    \"$0\" lab gen binary -o t.rep && cp t.rep good.rep &&
    ( trap '' XFSZ; ulimit -f 16; \"$0\" lab gen random --ops 200000 -o t.rep 2>err.txt; test $? -eq 2 ) &&
    grep -q 'write failed: File too large' err.txt && cmp t.rep good.rep && test \"$(ls | grep -c tmp)\" -eq 0 &&
    ln -s t.rep link.rep && \"$0\" lab gen coalescing -o link.rep && test -L link.rep && ! cmp -s t.rep good.rep &&
    \"$0\" lab gen binary -o /dev/stdout | cmp - good.rep"
  $<TARGET_FILE:tessera>)
# -o given twice wrote only the second file, silently.
add_test(NAME lab.gen_rejects_output_twice
  COMMAND sh -c "out=$(\"$0\" lab gen binary -o /nonexistent/a.rep -o /nonexistent/b.rep 2>&1); rc=$?; echo \"$out\"; test $rc -eq 2 && echo \"$out\" | grep -qF \"tessera lab gen: -o is given twice ('/nonexistent/a.rep' and '/nonexistent/b.rep')\""
  $<TARGET_FILE:tessera>)
