# Driver tests beyond the unit tests (included by tests/lab/CMakeLists.txt).
#  - lab.driver_cli runs the built `tessera lab` (so it depends on it);
#  - lab.gen_traces writes generated traces into the build dir, and
#    lab.generated_compare replays them on every policy with the checker on;
#  - lab.demo runs the default demo (generated in memory) with timing;
#  - lab.shared_classic / lab.shared_cmu64 replay every policy over the shared
#    trace sets with the checker on, and skip (77) when ../shared/traces is
#    absent: those files are other people's data and never in the repository.
if(TARGET lab_test_driver_cli AND TARGET tessera)
  add_dependencies(lab_test_driver_cli tessera)
endif()

set(LAB_GENERATED_TRACES ${CMAKE_BINARY_DIR}/lab-traces)
add_test(NAME lab.gen_traces
  COMMAND tessera lab gen all --seed 7 --ops 3000 -o ${LAB_GENERATED_TRACES})
set_tests_properties(lab.gen_traces PROPERTIES FIXTURES_SETUP lab_generated_traces)
add_test(NAME lab.generated_compare
  COMMAND tessera lab --compare --check --check-only ${LAB_GENERATED_TRACES})
set_tests_properties(lab.generated_compare PROPERTIES
  FIXTURES_REQUIRED lab_generated_traces TIMEOUT 300)

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
foreach(set classic:cmu-classic cmu64:cmu15213-64bit)
  string(REPLACE ":" ";" parts ${set})
  list(GET parts 0 short)
  list(GET parts 1 dir)
  add_test(NAME lab.shared_${short}
    COMMAND sh -c "if [ ! -d \"$1\" ]; then echo \"skipped: $1 is absent (the shared trace sets are read at run time, never committed)\"; exit 77; fi; exec \"$0\" lab --compare --check --check-budget ${LAB_SHARED_CHECK_BUDGET} --check-only \"$1\""
            $<TARGET_FILE:tessera> ${LAB_SHARED_TRACES}/${dir})
  set_tests_properties(lab.shared_${short} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1500)
endforeach()
