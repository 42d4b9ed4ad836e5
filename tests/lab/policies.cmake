# Policy tests beyond the unit tests (included by tests/lab/CMakeLists.txt).
# The replay of every policy over every shared trace with the checker on is
# lab.shared_* in driver.cmake; here: the malloc-lab handout drop-in.
#
# lab.handout_*: lab/handout/make_mm.sh writes a self-contained mm.c for a
# policy, which is built against a mock classic handout (tests/lab/handout:
# memlib.h with mem_sbrk(int), mm.h with team_t) with -Werror and graded by a
# small mdriver-like program, as a student would do with the real handout.
foreach(case segregated-apart:8 tree-best-apart:16 segregated-deferred:8 implicit-next:16)
  string(REPLACE ":" ";" parts ${case})
  list(GET parts 0 policy)
  list(GET parts 1 align)
  string(REPLACE "-" "_" tname ${policy})
  add_test(NAME lab.handout_${tname}_a${align}
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/handout/run_handout_test.sh
            ${CMAKE_C_COMPILER} ${PROJECT_SOURCE_DIR}
            ${CMAKE_CURRENT_BINARY_DIR}/handout-${policy}-${align} ${policy} ${align})
  set_tests_properties(lab.handout_${tname}_a${align} PROPERTIES TIMEOUT 120)
endforeach()

# A name make_mm.sh does not know, or that is not a name at all, is refused
# with exit status 2 and writes nothing to standard output.
foreach(bad no-such-policy "a.b")
  string(MAKE_C_IDENTIFIER "${bad}" bad_id)
  add_test(NAME lab.handout_refuses_${bad_id}
    COMMAND sh -c "out=$(sh \"$0\" \"$1\" 2>/dev/null); rc=$?; [ $rc -eq 2 ] && [ -z \"$out\" ]"
            ${PROJECT_SOURCE_DIR}/lab/handout/make_mm.sh ${bad})
endforeach()

# `system` (listed by --list-policies, but the C library's malloc) and an
# --align without its value: refused with a message saying so, exit 2.
foreach(case "system|system|'system' is the C library's malloc"
             "align_missing|--align|--align needs a value")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 id)
  list(GET parts 1 arg)
  list(GET parts 2 message)
  add_test(NAME lab.handout_refuses_${id}
    COMMAND sh -c "err=$(sh \"$0\" \"$1\" 2>&1 >/dev/null); rc=$?; echo \"$err\"; [ $rc -eq 2 ] && echo \"$err\" | grep -qF -e \"${message}\""
            ${PROJECT_SOURCE_DIR}/lab/handout/make_mm.sh ${arg})
endforeach()
