# Fast-path instruction budgets: a repeatable callgrind count (not a timing)
# of malloc+free pairs, on both the 32-byte ping-pong and the random
# 8-512-byte LIFO batches of bench/fastpath. A change that puts work back on
# a fast path fails its budget. Skipped (77) when valgrind is missing.
# Included by tests/lib (lib.fastpath_budget) and tests/security
# (security.fastpath_budget, the hardened build's).
# The workload program tests/lib/PROGRAM.c of a callgrind budget, built once
# (optimised, with malloc calls kept as calls) whichever test asks first.
function(tessera_budget_program program)
  if(NOT TARGET ${program})
    add_executable(${program} ${PROJECT_SOURCE_DIR}/tests/lib/${program}.c)
    target_compile_options(${program} PRIVATE -O2 -fno-builtin)
    target_link_libraries(${program} PRIVATE Threads::Threads)
  endif()
endfunction()

function(tessera_add_fastpath_budget test_name budget label library_target)
  if(NOT TARGET fastpath_bench)
    add_subdirectory(${PROJECT_SOURCE_DIR}/bench/fastpath ${CMAKE_BINARY_DIR}/bench/fastpath)
  endif()
  add_test(NAME ${test_name}
    COMMAND sh ${PROJECT_SOURCE_DIR}/bench/fastpath/fastpath.sh --check ${budget} --pairs 100000
            $<TARGET_FILE:fastpath_bench> ${label}=$<TARGET_FILE:${library_target}>)
  set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()

# Instructions per realloc that grows a large block by one byte (the
# growth stays within the block's pages), in LIBRARY_TARGET preloaded
# (tests/lib/grow_budget.sh). Skipped (77) when valgrind is missing.
function(tessera_add_grow_budget test_name budget library_target)
  tessera_budget_program(grow_budget)
  add_test(NAME ${test_name}
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/lib/grow_budget.sh ${budget}
            $<TARGET_FILE:grow_budget> $<TARGET_FILE:${library_target}>)
  set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()

# Instructions per large malloc+free cycle (tests/lib/large_cycle_budget.sh,
# bench/fastpath's large_cycle_bench), in LIBRARY_TARGET preloaded, for each
# MODE=BUDGET given after it. Skipped (77) when valgrind is missing.
function(tessera_add_large_cycle_budget test_name library_target)
  if(NOT TARGET large_cycle_bench)
    add_subdirectory(${PROJECT_SOURCE_DIR}/bench/fastpath ${CMAKE_BINARY_DIR}/bench/fastpath)
  endif()
  add_test(NAME ${test_name}
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/lib/large_cycle_budget.sh
            $<TARGET_FILE:large_cycle_bench> $<TARGET_FILE:${library_target}> ${ARGN})
  set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()

# Instructions per call of FUNCTION (and everything it calls; the
# script's default, tes_heap_malloc_generic, when FUNCTION is empty) in
# LIBRARY_TARGET preloaded, on the workload tests/lib/PROGRAM.c
# (tests/lib/slowpath_budget.sh). Skipped (77) when valgrind is missing.
function(tessera_add_call_budget test_name budget program library_target)
  tessera_budget_program(${program})
  add_test(NAME ${test_name}
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/lib/slowpath_budget.sh ${budget}
            $<TARGET_FILE:${program}> $<TARGET_FILE:${library_target}> ${ARGN})
  set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()

# Instructions per call of the malloc slow path (tes_heap_malloc_generic, or
# the function named after the library target, and everything it calls) in
# LIBRARY_TARGET preloaded, on slowpath_budget's fit-large-like workload.
function(tessera_add_slowpath_budget test_name budget library_target)
  tessera_add_call_budget(${test_name} ${budget} slowpath_budget ${library_target} ${ARGN})
endfunction()

# Instructions per malloc miss (tes_heap_malloc_miss and everything it
# calls) in LIBRARY_TARGET preloaded, on refill_budget's batches, where
# nearly every miss is a page refilled from its owner's frees. Extra
# arguments are NAME=VALUE settings for the environment (TESSERA_BINS=0).
function(tessera_add_refill_budget test_name budget library_target)
  tessera_add_call_budget(${test_name} ${budget} refill_budget ${library_target} tes_heap_malloc_miss)
  if(ARGN)
    set_tests_properties(${test_name} PROPERTIES ENVIRONMENT "${ARGN}")
  endif()
endfunction()

# Instructions per free that misses the slice table (tes_free_slow and
# everything it calls) in LIBRARY_TARGET preloaded, on
# remote_free_budget's batches, where nearly every such free is a free of
# another thread's block; or per call of the function named after the
# library target (malloc: the allocating thread's mallocs, whose misses
# refill pages from their remote stacks).
function(tessera_add_remote_free_budget test_name budget library_target)
  set(fn tes_free_slow)
  if(ARGN)
    set(fn ${ARGN})
  endif()
  tessera_add_call_budget(${test_name} ${budget} remote_free_budget ${library_target} ${fn})
endfunction()

# Locked instructions per large malloc+free cycle (tests/lib/locked_ops_budget.sh
# on tests/lib/locked_ops.c), in LIBRARY_TARGET preloaded: at most SINGLE_MAX
# in a single-threaded process, at least THREADED_MIN with a second thread.
# Skipped (77) when valgrind is missing.
function(tessera_add_locked_ops_budget test_name single_max threaded_min library_target)
  tessera_budget_program(locked_ops)
  add_test(NAME ${test_name}
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/lib/locked_ops_budget.sh
            $<TARGET_FILE:locked_ops> $<TARGET_FILE:${library_target}> ${single_max} ${threaded_min})
  set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()
