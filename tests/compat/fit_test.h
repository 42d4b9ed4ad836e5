/* fit_test.h — what the compat tests share: the four allocator variants as a
 * table, a CHECK macro that names the failing line, running one case in a
 * forked child (so every case starts with fresh, empty heaps), and helpers
 * that read the heap through the internal checker. Header-only.
 */
#ifndef TESSERA_FIT_TEST_H
#define TESSERA_FIT_TEST_H

#include "fit_internal.h"
#include "my_malloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fit_test_api {
  const char *name;
  void *(*alloc)(size_t);
  void (*release)(void *);
  int best_fit; /* 0 = first fit */
} fit_test_api_t;

static const fit_test_api_t fit_test_apis[] = {
    {"ff", ff_malloc, ff_free, 0},
    {"bf", bf_malloc, bf_free, 1},
    {"ts_lock", ts_malloc_lock, ts_free_lock, 1},
    {"ts_nolock", ts_malloc_nolock, ts_free_nolock, 1},
};
#define FIT_TEST_API_COUNT (sizeof fit_test_apis / sizeof fit_test_apis[0])

#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

/* Fails the test when any heap invariant is broken. */
#define CHECK_HEAP()                                                                   \
  do {                                                                                 \
    char fit_err_[256];                                                                \
    if (fit_check_all(fit_err_, sizeof fit_err_) != 0) {                               \
      fprintf(stderr, "%s:%d: heap check failed: %s\n", __FILE__, __LINE__, fit_err_); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

/* Block size the allocator uses for a request (mirrors fit_arena.c). */
static inline size_t fit_test_block_size(size_t n) {
  size_t need = (n + FIT_HEADER_SIZE + FIT_ALIGN - 1) & ~(size_t)(FIT_ALIGN - 1);
  return need < FIT_MIN_BLOCK ? FIT_MIN_BLOCK : need;
}

/* The arena that owns an allocated payload. */
static inline fit_arena_t *fit_test_arena_of(void *p) { return fit_arena_by_id(fit_header_of(p)->owner); }

/* Runs case_fn(api) in a child; returns 0 when it exited 0. */
static inline int fit_test_run(const char *case_name, void (*case_fn)(const fit_test_api_t *),
                               const fit_test_api_t *api) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 1;
  }
  if (pid == 0) {
    case_fn(api);
    fflush(NULL);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  printf("%-4s %-22s %s\n", ok ? "ok" : "FAIL", case_name, api ? api->name : "");
  if (!ok && WIFSIGNALED(status)) printf("     (killed by signal %d)\n", WTERMSIG(status));
  return !ok;
}

#endif
