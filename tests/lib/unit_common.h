/* unit_common.h — tiny check helpers for the white-box unit tests of
 * libtessera (tests/lib/unit_*.c). CHECK records a failure and continues;
 * REQUIRE stops the test. main() returns unit_finish(). */
#ifndef TESSERA_TESTS_UNIT_COMMON_H
#define TESSERA_TESTS_UNIT_COMMON_H

#include <stdio.h>
#include <stdlib.h>

static int unit_failures;

#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond);        \
      fprintf(stderr, __VA_ARGS__);                                          \
      fputc('\n', stderr);                                                   \
      unit_failures++;                                                       \
    }                                                                        \
  } while (0)

#define REQUIRE(cond, ...)                                                   \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: FATAL %s: ", __FILE__, __LINE__, #cond);       \
      fprintf(stderr, __VA_ARGS__);                                          \
      fputc('\n', stderr);                                                   \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

static inline int unit_finish(const char *name) {
  if (unit_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, unit_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif
