# The "verify" tests of libtessera (black-box API, multi-threaded stress,
# thread churn, fork, statistics, options, heaps, RSS targets, `tessera run`).
# Included by tests/lib/CMakeLists.txt, which already builds every api_*.c /
# api_*.cpp as lib.<name> linked with libtessera.a. This file adds:
#   - -fno-builtin for those programs: gcc otherwise deletes a malloc whose
#     block is freed unused, and the statistics tests count real calls;
#   - the standard-name programs built a second time without libtessera and
#     run under LD_PRELOAD=libtessera.so (lib.<name>.preload), and the
#     conformance and stress ones under the hardened libtessera-secure.so
#     (lib.<name>.secure); --expect-tessera makes them fail if the preload
#     did not take effect;
#   - the conformance and stress programs with eager purging
#     (lib.<name>.eager_purge: TESSERA_PURGE_DELAY_MS=0, SEGMENT_CACHE=0);
#   - the same programs linked fully static with libtessera.a
#     (lib.<name>.static);
#   - lib.api_dlopen: libtessera.so dlopened by a program on glibc;
#   - tools.run_cli: `tessera run` end to end (verify_run_cli.sh).
set(VERIFY_API_TESTS api_std api_cxx api_mt_stress api_fork api_thread_churn api_thread_handoff api_heaps_mt
    api_stats api_options api_heaps api_rss api_large_vm)
foreach(name ${VERIFY_API_TESTS})
  if(TARGET lib_${name})
    target_compile_options(lib_${name} PRIVATE -fno-builtin)
  endif()
endforeach()
if(TEST lib.api_rss)
  # Peaks at ~1.1 GiB of RSS: keep it from overlapping other heavy tests.
  set_tests_properties(lib.api_rss PROPERTIES RUN_SERIAL TRUE)
endif()
# lib.unit_purge judges a purge undone "at once" (within four purge delays,
# 100 ms) on the real clock: under ctest -j with other tests on both cores
# it failed once in a session's runs. Alone, it did not in 30 runs with
# three busy loops beside it.
if(TEST lib.unit_purge)
  set_tests_properties(lib.unit_purge PROPERTIES RUN_SERIAL TRUE)
endif()

# Parked heaps (src/heap.c, tes_heap_park) under remote frees, forced
# collects and statistics (lib.api_park_stress, no fork); .fork forks while
# they change hands, the child's threads taking the parent's parked heaps;
# .no_park the same with TESSERA_HEAP_PARK=0 (the abandon at thread exit).
# The nineteenth session's merges with the bins off (growth_trim then
# flushes nothing; the hardened build's TESSERA_BINS=0 below).
if(TEST lib.api_merge19_stress)
  add_test(NAME lib.api_merge19_stress.no_bins COMMAND lib_api_merge19_stress)
  set_tests_properties(lib.api_merge19_stress.no_bins PROPERTIES TIMEOUT 300 ENVIRONMENT "TESSERA_BINS=0")
endif()
# lib.api_full_bin_rss's loop without the grown bin, and as a ping-pong
# (twenty-fourth session: the deferred work of a loop that fits its bins).
if(TEST lib.api_full_bin_rss)
  add_test(NAME lib.api_full_bin_rss.no_grow COMMAND lib_api_full_bin_rss no_grow)
  add_test(NAME lib.api_full_bin_rss.pingpong COMMAND lib_api_full_bin_rss pingpong)
  set_tests_properties(lib.api_full_bin_rss.no_grow lib.api_full_bin_rss.pingpong PROPERTIES TIMEOUT 300)
endif()
# lib.api_bins_park_stress with the bins off from the start, and going on
# after a reported error (review21, twenty-first session).
if(TEST lib.api_bins_park_stress)
  add_test(NAME lib.api_bins_park_stress.no_bins COMMAND lib_api_bins_park_stress)
  add_test(NAME lib.api_bins_park_stress.continue COMMAND lib_api_bins_park_stress)
  set_tests_properties(lib.api_bins_park_stress.no_bins PROPERTIES TIMEOUT 300 ENVIRONMENT "TESSERA_BINS=0")
  set_tests_properties(lib.api_bins_park_stress.continue PROPERTIES TIMEOUT 300 ENVIRONMENT "TESSERA_ABORT_ON_ERROR=0")
endif()
if(TEST lib.api_park_stress)
  add_test(NAME lib.api_park_stress.fork COMMAND lib_api_park_stress fork)
  add_test(NAME lib.api_park_stress.no_park COMMAND lib_api_park_stress fork)
  set_tests_properties(lib.api_park_stress.fork lib.api_park_stress.no_park PROPERTIES TIMEOUT 300)
  set_tests_properties(lib.api_park_stress.no_park PROPERTIES ENVIRONMENT "TESSERA_HEAP_PARK=0")
endif()

# Standard names only: the same sources, linked with nothing but libc.
set(VERIFY_PRELOAD_TESTS api_std api_cxx api_mt_stress api_fork api_thread_churn api_thread_handoff api_large_vm)
foreach(name ${VERIFY_PRELOAD_TESTS})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${name}.c)
    set(src ${CMAKE_CURRENT_SOURCE_DIR}/${name}.c)
  else()
    set(src ${CMAKE_CURRENT_SOURCE_DIR}/${name}.cpp)
  endif()
  add_executable(verify_${name}_plain ${src})
  target_include_directories(verify_${name}_plain PRIVATE ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(verify_${name}_plain PRIVATE -fno-builtin)
  target_link_libraries(verify_${name}_plain PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  add_test(NAME lib.${name}.preload COMMAND verify_${name}_plain --expect-tessera)
  set_tests_properties(lib.${name}.preload PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_shared>")
endforeach()
if(TARGET tessera_secure)
  foreach(name api_std api_cxx api_mt_stress api_thread_handoff api_large_vm)
    add_test(NAME lib.${name}.secure COMMAND verify_${name}_plain --expect-tessera)
    set_tests_properties(lib.${name}.secure PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
      ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_secure>")
  endforeach()
  # First-class heaps and options need the tes_* names: linked with the
  # hardened library. api_purge_thread.secure also bounds the empty pages
  # the hardened build keeps in an idle thread's queues (src/heap.c).
  # api_large_front.secure: the dirty front before a hardened large block;
  # api_large_front_race.secure: that front purged by another thread while
  # the block is realloc'd in place (also sanitize.lib_large_front_race);
  # api_remote_extend_race.secure: remote frees into pages their owner is
  # carving (also sanitize.lib_remote_extend_race); api_heap_destroy_mt.secure:
  # heaps destroyed by another thread (also sanitize.lib_heap_destroy_race);
  # api_large_xfree.secure: large blocks freed by other threads while they
  # are realloc'd and trimmed (also sanitize.lib_large_xfree);
  # api_remote_sweep.secure: queued pages retired once per purge delay while
  # another thread frees into them (also sanitize.lib_remote_sweep);
  # api_kept_destroy_race.secure: a heap with kept pages destroyed while
  # another thread collects (also sanitize.lib_kept_destroy_race).
  # api_fc_collect.secure: tes_collect reaches the thread's first-class heaps.
  # api_visit_collect.secure: tes_collect from a tes_heap_visit visitor;
  # api_visit_foreign.secure: walks of another thread's heap as it unmaps
  # segments; api_visit_delete.secure: a heap deleted or destroyed under its
  # thread's walk of it.
  # api_idle_class_rss.secure: emptied class heads retire in the hardened
  # build too (3.31 MiB above the start before, 0.02 after).
  # api_park_stress.secure: the hardened build's parked heaps (twentieth
  # session; before, none was parked there); api_park_rss.secure: a parked
  # hardened heap's retired pages bounded as the default build's, counted
  # by what each carved (twenty-first session; before, each counted whole).
  # api_merge19_stress.secure: the nineteenth session's merges together
  # (large cache take, growth_trim, the hardened medium bins).
  # api_bins_park_stress.secure: the twenty-first session's merges together
  # (review21; the hardened build's park flushes its bins, miss_rotate).
  # api_full_bin_rss.secure: a loop of 32-byte blocks with no malloc slow
  # path gives idle classes' heads back (the hardened build's small classes
  # have no bins: its loop takes slow paths).
  # api_remote_bits_stress.secure: the hardened remote-free bitmap under
  # producer threads that exit while one consumer frees their blocks
  # (rev25; also sanitize.lib_remote_bits_stress).
  foreach(name api_heaps_mt api_purge_thread api_large_front api_large_front_race api_remote_extend_race
          api_heap_destroy_mt api_large_xfree api_remote_sweep api_kept_destroy_race api_fc_collect
          api_idle_class_rss api_fc_sweep_stress api_visit_collect api_visit_foreign api_visit_delete
          api_park_stress api_merge19_stress api_park_rss api_bins_park_stress api_full_bin_rss
          api_remote_bits_stress)
    add_executable(verify_${name}_secure ${CMAKE_CURRENT_SOURCE_DIR}/${name}.c)
    target_include_directories(verify_${name}_secure PRIVATE ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR})
    target_compile_options(verify_${name}_secure PRIVATE -fno-builtin)
    target_link_libraries(verify_${name}_secure PRIVATE tessera_secure Threads::Threads ${CMAKE_DL_LIBS})
    add_test(NAME lib.${name}.secure COMMAND verify_${name}_secure)
    set_tests_properties(lib.${name}.secure PROPERTIES TIMEOUT 300)
  endforeach()
  # exit_double_free_race.secure: blocks freed twice by other threads
  # while their owner exits, each reported once (also
  # sanitize.lib_exit_double_free_race, where the race on a page's in_use
  # showed; the hardened build only: the default build does not see a
  # block freed again from its page's list).
  add_executable(verify_exit_double_free_race_secure ${CMAKE_CURRENT_SOURCE_DIR}/exit_double_free_race.c)
  target_include_directories(verify_exit_double_free_race_secure PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(verify_exit_double_free_race_secure PRIVATE -fno-builtin)
  target_link_libraries(verify_exit_double_free_race_secure PRIVATE tessera_secure Threads::Threads)
  add_test(NAME lib.exit_double_free_race.secure COMMAND verify_exit_double_free_race_secure)
  set_tests_properties(lib.exit_double_free_race.secure PROPERTIES TIMEOUT 300)
endif()

# In the default build too: the kept-pages destroy race's statistics (no
# kept pages there: the same counts must hold), tes_collect from a
# thread reaching its first-class heaps, and from a tes_heap_visit visitor,
# walks of another thread's heap, and heaps deleted under their walk.
foreach(name api_kept_destroy_race api_fc_collect api_visit_collect api_visit_foreign api_visit_delete)
  add_executable(verify_${name}_default ${CMAKE_CURRENT_SOURCE_DIR}/${name}.c)
  target_include_directories(verify_${name}_default PRIVATE ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(verify_${name}_default PRIVATE -fno-builtin)
  target_link_libraries(verify_${name}_default PRIVATE tessera_shared Threads::Threads ${CMAKE_DL_LIBS})
  add_test(NAME lib.${name}.default COMMAND verify_${name}_default)
  set_tests_properties(lib.${name}.default PROPERTIES TIMEOUT 300)
endforeach()

# The same sweep in the default build (tes_* names: linked with it).
add_executable(verify_api_remote_sweep_default ${CMAKE_CURRENT_SOURCE_DIR}/api_remote_sweep.c)
target_include_directories(verify_api_remote_sweep_default PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(verify_api_remote_sweep_default PRIVATE tessera_shared Threads::Threads)
add_test(NAME lib.api_remote_sweep.default COMMAND verify_api_remote_sweep_default)
set_tests_properties(lib.api_remote_sweep.default PROPERTIES TIMEOUT 300)
# Mode hold: a page's first block held live over several sweeps (it fails,
# a crash or a double free reported, when tes_page_take_if_empty lets a page
# with one live block go).
add_test(NAME lib.api_remote_sweep_hold.default COMMAND verify_api_remote_sweep_default 300 hold)
set_tests_properties(lib.api_remote_sweep_hold.default PROPERTIES TIMEOUT 300)
if(TARGET tessera_secure)
  add_test(NAME lib.api_remote_sweep_hold.secure COMMAND verify_api_remote_sweep_secure 300 hold)
  set_tests_properties(lib.api_remote_sweep_hold.secure PROPERTIES TIMEOUT 300)
endif()

# A C++ program replacing only plain operator new/delete with a pool of its
# own: the forms it leaves to libtessera must reach them, preloaded (plain
# and hardened) and linked from libtessera.a, which must link at all beside
# the program's definitions: built at test time, so that an archive that
# clashes fails this test rather than the build.
add_executable(verify_cxx_replaced_plain ${CMAKE_CURRENT_SOURCE_DIR}/cxx_replaced.cpp)
target_compile_options(verify_cxx_replaced_plain PRIVATE -fno-builtin)
target_link_libraries(verify_cxx_replaced_plain PRIVATE ${CMAKE_DL_LIBS})
add_test(NAME lib.cxx_replaced.preload COMMAND verify_cxx_replaced_plain --expect-tessera)
set_tests_properties(lib.cxx_replaced.preload PROPERTIES TIMEOUT 60
  ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_shared>")
if(TARGET tessera_secure)
  add_test(NAME lib.cxx_replaced.secure COMMAND verify_cxx_replaced_plain --expect-tessera)
  set_tests_properties(lib.cxx_replaced.secure PROPERTIES TIMEOUT 60
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_secure>")
endif()
add_test(NAME lib.cxx_replaced.static_archive
  COMMAND sh -c "\"$0\" -std=c++17 -O1 -fno-builtin \"$1\" \"$2\" -lpthread -ldl -o \"$3\" && \"$3\""
          ${CMAKE_CXX_COMPILER} ${CMAKE_CURRENT_SOURCE_DIR}/cxx_replaced.cpp $<TARGET_FILE:tessera_static>
          ${CMAKE_CURRENT_BINARY_DIR}/cxx_replaced_static)
set_tests_properties(lib.cxx_replaced.static_archive PROPERTIES TIMEOUT 120)

# A C program that dlopens a C++ library (python and its C++ extension
# modules): libstdc++ comes after libtessera, RTLD_LOCAL or RTLD_GLOBAL, and
# a failing operator new in the library must still call its new_handler and
# throw std::bad_alloc (nothrow forms: nullptr). It aborted before.
add_library(verify_cxx_plugin MODULE ${CMAKE_CURRENT_SOURCE_DIR}/cxx_plugin.cpp)
target_include_directories(verify_cxx_plugin PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(verify_cxx_plugin PRIVATE -fno-builtin)
add_executable(verify_cxx_plugin_host ${CMAKE_CURRENT_SOURCE_DIR}/cxx_plugin_host.c)
target_link_libraries(verify_cxx_plugin_host PRIVATE ${CMAKE_DL_LIBS})
foreach(scope local global)
  add_test(NAME lib.cxx_plugin_${scope}.preload
    COMMAND verify_cxx_plugin_host $<TARGET_FILE:verify_cxx_plugin> ${scope} --expect-tessera)
  set_tests_properties(lib.cxx_plugin_${scope}.preload PROPERTIES TIMEOUT 60
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_shared>")
  if(TARGET tessera_secure)
    add_test(NAME lib.cxx_plugin_${scope}.secure
      COMMAND verify_cxx_plugin_host $<TARGET_FILE:verify_cxx_plugin> ${scope} --expect-tessera)
    set_tests_properties(lib.cxx_plugin_${scope}.secure PROPERTIES TIMEOUT 60
      ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_secure>")
  endif()
endforeach()

# libtessera.so dlopened at run time by a program running on glibc (the
# plugin / Python extension case: static TLS, late initialisation).
add_executable(verify_dlopen ${CMAKE_CURRENT_SOURCE_DIR}/verify_dlopen.c)
target_include_directories(verify_dlopen PRIVATE ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(verify_dlopen PRIVATE -fno-builtin)
target_link_libraries(verify_dlopen PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
add_test(NAME lib.api_dlopen COMMAND verify_dlopen $<TARGET_FILE:tessera_shared>)
set_tests_properties(lib.api_dlopen PROPERTIES TIMEOUT 120)

# Eager purging (no delay, no segment cache): a page purged or a segment
# unmapped while a block in it is still live shows up as a pattern mismatch.
foreach(name api_std api_mt_stress)
  add_test(NAME lib.${name}.eager_purge COMMAND verify_${name}_plain --expect-tessera)
  set_tests_properties(lib.${name}.eager_purge PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_shared>;TESSERA_PURGE_DELAY_MS=0;TESSERA_SEGMENT_CACHE=0")
endforeach()

# Fully static programs (-static: glibc's own malloc must stay out, and
# libtessera must initialise without the dynamic loader), when this
# machine has the static C library.
include(CheckCSourceCompiles)
set(CMAKE_REQUIRED_LINK_OPTIONS -static)
check_c_source_compiles("int main(void) { return 0; }" VERIFY_HAVE_STATIC_LIBC)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(VERIFY_HAVE_STATIC_LIBC)
  foreach(name api_std api_cxx api_mt_stress api_fork api_thread_churn)
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${name}.c)
      set(src ${CMAKE_CURRENT_SOURCE_DIR}/${name}.c)
    else()
      set(src ${CMAKE_CURRENT_SOURCE_DIR}/${name}.cpp)
    endif()
    add_executable(verify_${name}_static ${src})
    target_include_directories(verify_${name}_static PRIVATE ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR})
    target_compile_options(verify_${name}_static PRIVATE -fno-builtin)
    target_link_options(verify_${name}_static PRIVATE -static)
    target_link_libraries(verify_${name}_static PRIVATE tessera_static Threads::Threads)
    add_test(NAME lib.${name}.static COMMAND verify_${name}_static --expect-tessera)
    set_tests_properties(lib.${name}.static PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  endforeach()
else()
  message(STATUS "verify: no static libc (libc6-dev's libc.a): lib.api_*.static tests not built")
endif()

# `tessera run`, end to end, with a small allocating program to run.
if(TARGET tessera)
  add_test(NAME tools.run_cli
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/verify_run_cli.sh $<TARGET_FILE:tessera>
            $<TARGET_FILE:verify_api_std_plain>)
  set_tests_properties(tools.run_cli PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()

# A selection of the multi-threaded tests again with the purge thread on
# (TESSERA_PURGE_THREAD=1, src/purge.c), so that the option stays tested
# (twenty-fourth session; about 10 s in all). review23 ran the suite's 55
# multi-threaded tests with it: the .default and .secure kept-destroy races
# and merge19_stress.secure failed every run, because the thread started on
# the program's first slow path and glibc's pthread_create allocated its
# DTV there, inside the tests' counting windows; it starts at load since
# (init.c, tes_constructor).
foreach(pair lib.api_mt_stress:lib_api_mt_stress lib.api_thread_churn:lib_api_thread_churn
    lib.api_park_stress:lib_api_park_stress lib.api_fc_sweep_stress:lib_api_fc_sweep_stress
    lib.api_bins_park_stress:lib_api_bins_park_stress
    lib.api_kept_destroy_race.default:verify_api_kept_destroy_race_default
    lib.api_kept_destroy_race.secure:verify_api_kept_destroy_race_secure
    lib.api_merge19_stress.secure:verify_api_merge19_stress_secure
    lib.exit_double_free_race.secure:verify_exit_double_free_race_secure)
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 test)
  list(GET pair 1 program)
  if(TEST ${test} AND TARGET ${program})
    add_test(NAME ${test}.purge_thread COMMAND ${program})
    set_tests_properties(${test}.purge_thread PROPERTIES TIMEOUT 300 ENVIRONMENT "TESSERA_PURGE_THREAD=1")
  endif()
endforeach()

# lib.tiny_resident: libtessera's own resident memory in a program that
# makes eight small allocations, read from its /proc/self/smaps (a memory
# budget, not a timing): at most 8 KiB of its .bss (24 before the large
# zero arrays were linked after the small variables, TES_BIG_BSS, lean24;
# 12 before the statistics arrays and rings joined them, start26) and 132
# KiB in all (its file's 120 KiB on 2026-11-24: the text is resident whole,
# fault-around; 132 with the second static heap's .data and relocations,
# start26). The hardened library: 8 and 148 (136 of its file; 12 and 164
# before). PERFORMANCE.md, twenty-fourth session, lean24, and
# twenty-sixth session, start26.
add_executable(verify_tiny_resident ${CMAKE_CURRENT_SOURCE_DIR}/tiny_resident.c)
target_compile_options(verify_tiny_resident PRIVATE -fno-builtin)
add_test(NAME lib.tiny_resident COMMAND verify_tiny_resident 8 132)
set_tests_properties(lib.tiny_resident PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
  ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_shared>")
# lib.first_malloc_budget: the system calls of a process's first malloc(16)
# (counted by ptrace between two markers) and its first segment's header
# pages: at most 2 calls and no munmap (the heap struct's chunk, then the
# segment at the hint just below it; 4 before, an over-map and two trims),
# and no OS page of the header beyond its first mapped (the link read all
# 64 page descriptors, three zero pages' faults). The hardened build's two
# guard pages add two mprotects (budget 4; 6 before). PERFORMANCE.md,
# twenty-sixth session, start26.
add_executable(verify_first_malloc_budget ${CMAKE_CURRENT_SOURCE_DIR}/first_malloc_budget.c)
target_compile_options(verify_first_malloc_budget PRIVATE -fno-builtin)
add_test(NAME lib.first_malloc_budget COMMAND verify_first_malloc_budget 2)
set_tests_properties(lib.first_malloc_budget PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
  ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_shared>")
if(TARGET tessera_secure)
  add_test(NAME lib.tiny_resident.secure COMMAND verify_tiny_resident 8 148)
  set_tests_properties(lib.tiny_resident.secure PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_secure>")
  add_test(NAME lib.first_malloc_budget.secure COMMAND verify_first_malloc_budget 4)
  set_tests_properties(lib.first_malloc_budget.secure PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tessera_secure>")
endif()
