# lib.fastpath_budget: the golden instruction count of the fast path. A
# repeatable callgrind count (not a timing): malloc+free must stay within 42
# instructions per pair on both the 32-byte ping-pong and the random
# 8-512-byte LIFO batches. Skipped (77) when valgrind is missing.
if(NOT TARGET fastpath_bench)
  add_subdirectory(${PROJECT_SOURCE_DIR}/bench/fastpath ${CMAKE_BINARY_DIR}/bench/fastpath)
endif()
add_test(NAME lib.fastpath_budget
  COMMAND sh ${PROJECT_SOURCE_DIR}/bench/fastpath/fastpath.sh --check 42 --pairs 100000
          $<TARGET_FILE:fastpath_bench> tessera=$<TARGET_FILE:tessera_shared>)
set_tests_properties(lib.fastpath_budget PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
