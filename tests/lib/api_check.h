/* api_check.h — the small harness shared by the black-box tests in
 * tests/lib/api_*.c (the "verify" tests).
 *
 * Each test file is a list of small named checks. CHECK() records a failure
 * with file:line and the check's name and goes on, so one run reports every
 * broken check; the program's exit status is the number of failed checks
 * (capped), 0 when all passed, 77 when the test must be skipped.
 *
 * The same source files run in three setups: linked with libtessera.a, as a
 * plain program under LD_PRELOAD=libtessera.so, and (during development)
 * against glibc or another allocator to prove the checks themselves right.
 * api_allocator_is_tessera() tells which allocator actually serves malloc,
 * looking the tessera entry points up at run time so that the plain build
 * does not need them at link time.
 *
 * Build these tests with -fno-builtin (tests/lib/verify.cmake does): gcc
 * otherwise deletes a malloc whose block is freed unused, and a test that
 * counts calls would count calls that never happened. */
#ifndef TESSERA_TESTS_API_CHECK_H
#define TESSERA_TESTS_API_CHECK_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "active_clock.h" /* api_now_seconds */

static int api_failures;
static const char *api_current_group = "";

/* A named group of checks: printed so a failure can be found in the log. */
#define API_GROUP(name) (api_current_group = (name))

#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      api_failures++;                                                       \
      fprintf(stderr, "%s:%d: FAIL [%s] %s: ", __FILE__, __LINE__,          \
              api_current_group, #cond);                                    \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
    }                                                                       \
  } while (0)

/* A check whose failure makes the rest of the test meaningless. */
#define REQUIRE(cond, ...)                                                  \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: FATAL [%s] %s: ", __FILE__, __LINE__,         \
              api_current_group, #cond);                                    \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
      exit(100);                                                            \
    }                                                                       \
  } while (0)

static inline int api_finish(const char *test_name) {
  if (api_failures == 0) {
    printf("%s: all checks passed\n", test_name);
    return 0;
  }
  fprintf(stderr, "%s: %d check(s) failed\n", test_name, api_failures);
  return api_failures > 99 ? 99 : api_failures;
}

/* The tessera entry point `name` if the allocator in this process is
 * libtessera (linked in or preloaded), else NULL. */
static inline void *api_tessera_symbol(const char *name) {
  return dlsym(RTLD_DEFAULT, name);
}

/* Weak: resolve to libtessera's when the test is linked with it (a static
 * link puts no symbol where dlsym can see it), NULL in the plain build,
 * where dlsym then finds a preloaded libtessera.so. */
extern void *tes_malloc(size_t size) __attribute__((weak));

/* The tessera function `weak` (linked in) or `name` (preloaded), or NULL. */
#define API_TESSERA_FN(weak, name) ((weak) ? (void *)(weak) : api_tessera_symbol(name))

static inline bool api_allocator_is_tessera(void) {
  return tes_malloc != NULL || api_tessera_symbol("tes_malloc") != NULL;
}

/* `--expect-tessera` on the command line: fail at once when the process is
 * not running on libtessera (a preload that silently did not take effect
 * would otherwise test glibc and pass). */
static inline void api_require_tessera_if_asked(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--expect-tessera"))
      REQUIRE(api_allocator_is_tessera(),
              "expected libtessera to serve malloc (LD_PRELOAD=%s)",
              getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "(unset)");
}

/* Field `field` of /proc/self/statm in bytes: 0 is the address space
 * mapped (VmSize), 1 the resident set (VmRSS). open and read into a stack
 * buffer: no allocation, so a test can watch memory without calling the
 * allocator (fopen would malloc its FILE). */
static inline int64_t api_statm_bytes(int field) {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  const char *p = text;
  for (int i = 0; i < field && p != NULL; i++)
    if ((p = strchr(p, ' ')) != NULL) p++;
  if (p == NULL) return -1;
  long long pages = 0;
  for (; *p >= '0' && *p <= '9'; p++) pages = pages * 10 + (*p - '0');
  return (int64_t)pages * sysconf(_SC_PAGESIZE);
}
static inline int64_t api_rss_bytes(void) { return api_statm_bytes(1); }
static inline int64_t api_vsz_bytes(void) { return api_statm_bytes(0); }

static inline double api_now_seconds(void) { return active_clock_now(); }

static inline void api_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Fill / verify a block with a pattern derived from its address and size,
 * so a block handed to the wrong owner, overlapped or corrupted is caught. */
static inline uint8_t api_pattern_byte(const void *block, size_t size, size_t i) {
  uintptr_t a = (uintptr_t)block;
  return (uint8_t)((a >> 4) ^ (a >> 13) ^ size ^ (i * 131u) ^ (i >> 8));
}

static inline void api_fill(void *block, size_t size) {
  uint8_t *b = block;
  for (size_t i = 0; i < size; i++) b[i] = api_pattern_byte(block, size, i);
}

/* Index of the first wrong byte, or SIZE_MAX when the pattern is intact. */
static inline size_t api_verify(const void *block, size_t size) {
  const uint8_t *b = block;
  for (size_t i = 0; i < size; i++)
    if (b[i] != api_pattern_byte(block, size, i)) return i;
  return SIZE_MAX;
}

#define MIB ((int64_t)1 << 20)

/* `count` blocks of `size` bytes into blocks[], each written in full with
 * `byte`, so that all of their pages count in RSS (the RSS tests). */
static inline void api_malloc_written(void **blocks, size_t count, size_t size, int byte) {
  for (size_t i = 0; i < count; i++) {
    blocks[i] = malloc(size);
    REQUIRE(blocks[i] != NULL, "malloc failed");
    memset(blocks[i], byte, size);
  }
}

#ifdef TESSERA_H
/* For tests linked with libtessera (which include tessera.h first): malloc
 * really is libtessera's when tes_usable_size recognises its blocks. A weak
 * symbol or dlsym cannot tell in a static link, this can. */
static inline bool api_malloc_is_linked_tessera(void) {
  char *p = malloc(100);
  if (!p) return false;
  p[0] = 1;
  bool ours = tes_usable_size(p) >= 100;
  free(p);
  return ours;
}

/* glibc's pthread_create keeps a little memory per new thread (DTV, stack
 * cache) through malloc the first time: start and join one thread before
 * exact in_use comparisons so that it is not counted against the test. */
#include <pthread.h>
static void *api_noop_thread(void *arg) { return arg; }
static inline void api_warm_up_threads(void) {
  pthread_t t[4];
  int started = 0;
  while (started < 4 && pthread_create(&t[started], NULL, api_noop_thread, NULL) == 0) started++;
  while (started > 0) pthread_join(t[--started], NULL);
}
#endif

#endif
