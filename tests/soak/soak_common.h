/* soak_common.h — what the soak programs share: which allocator entry points
 * they call, content patterns, failure reporting and RSS readings.
 *
 * A soak program is built two ways. Normally it calls the standard names
 * (malloc, free, ...) and is linked with the drop-in libtessera, so it tests
 * the library exactly as programs use it; soak_require_tessera() proves at
 * start that malloc really is tessera's. Built with -DSOAK_TES_API it calls
 * tes_* and links tessera_nooverride, which is how the sanitizer builds
 * (tests/sanitize) run the same programs under ASan and TSan without the
 * allocator fighting the sanitizer for malloc.
 * SOAK_CHECK() prints file:line and exits 1; it only uses write(2)-safe paths
 * where that matters (the fork child uses soak_die directly). */
#ifndef TESSERA_TESTS_SOAK_COMMON_H
#define TESSERA_TESTS_SOAK_COMMON_H

#include "tessera.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SOAK_TES_API
#define soak_malloc tes_malloc
#define soak_calloc tes_calloc
#define soak_realloc tes_realloc
#define soak_free tes_free
#else
#define soak_malloc malloc
#define soak_calloc calloc
#define soak_realloc realloc
#define soak_free free
#endif

/* Async-signal-safe failure exit: usable in a forked child. */
static inline void soak_die(const char *msg) {
  ssize_t r = write(STDERR_FILENO, msg, strlen(msg));
  (void)r;
  _exit(1);
}

#define SOAK_STR2(x) #x
#define SOAK_STR(x) SOAK_STR2(x)
#define SOAK_CHECK(cond)                                                        \
  do {                                                                          \
    if (!(cond)) soak_die(__FILE__ ":" SOAK_STR(__LINE__) ": check failed: " #cond "\n"); \
  } while (0)

static inline unsigned char soak_byte(uint64_t seed, size_t i) {
  return (unsigned char)((seed * 0x9E3779B97F4A7C15ull) >> 56 ^ (i * 29u));
}

static inline void soak_fill(unsigned char *p, size_t size, uint64_t seed) {
  unsigned char base = soak_byte(seed, 0);
  for (size_t i = 0; i < size; i++) p[i] = (unsigned char)(base ^ (i * 29u));
}

static inline bool soak_intact(const unsigned char *p, size_t size, uint64_t seed) {
  unsigned char base = soak_byte(seed, 0), bad = 0;
  for (size_t i = 0; i < size; i++) bad |= (unsigned char)(p[i] ^ base ^ (i * 29u));
  return bad == 0;
}

/* Resident set size of this process in bytes (from /proc/self/statm). */
static inline size_t soak_rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    fclose(f);
  }
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* In the drop-in build, malloc must be tessera's: tes_usable_size knows the
 * block exactly (a glibc block would be foreign to it). */
static inline void soak_require_tessera(void) {
#ifndef SOAK_TES_API
  void *p = malloc(100);
  SOAK_CHECK(p != NULL);
  if (tes_usable_size(p) < 100) {
    fprintf(stderr, "soak: malloc is not served by libtessera\n");
    exit(1);
  }
  free(p);
#endif
}

static inline uint64_t soak_rng(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

#endif
