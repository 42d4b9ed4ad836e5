/* check.h: the small assertion harness of the C unit tests in tests/lab and
 * tests/bench. CHECK records a failure (file:line and the condition) and goes
 * on, so one run reports every broken case; a test's main ends with
 * `return failures ? 1 : 0;`. Header-only: each test program has its own
 * counter. */
#ifndef TESSERA_TESTS_CHECK_H
#define TESSERA_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                               \
    }                                                                           \
  } while (0)

#endif
