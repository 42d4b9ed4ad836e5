// cxx_check.h — the CHECK macro of the C++ tests (api_cxx.cpp,
// cxx_replaced.cpp): records a failure in `failures` and goes on.
#ifndef TESSERA_TESTS_CXX_CHECK_H
#define TESSERA_TESTS_CXX_CHECK_H

#include <cstdio>

static int failures;

#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      failures++;                                                               \
      std::fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond);      \
      std::fprintf(stderr, __VA_ARGS__);                                        \
      std::fputc('\n', stderr);                                                 \
    }                                                                           \
  } while (0)

#endif
