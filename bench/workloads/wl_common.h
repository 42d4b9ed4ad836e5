/* Shared helpers for the bench workload programs (bench/workloads/).
 *
 * Every workload is a standalone program that uses only the standard malloc
 * API (plus pthreads), so that any allocator can be slid underneath it with
 * LD_PRELOAD. The contract with the runner (bench/runner/bench_proc.c):
 *   - options: --scale F (work multiplier, 1.0 = about a second on the
 *     system allocator on a 2-core machine; at most 1e6), --threads N,
 *     --seed S, --mode M (only the modes a program declares), --help; no
 *     positional argument unless the program takes some (trace files);
 *     anything else exits with status 2;
 *   - stdout: `key=value` lines; `work_s=` is the duration of the measured
 *     region (the runner prefers it to the whole-process wall time), other
 *     keys (ops_per_s=, ...) are recorded as extra metrics;
 *   - a wrong result (NULL from malloc, corrupted contents, misalignment)
 *     prints one line to stderr and exits with status 3, which the runner
 *     reports as a failure of the allocator under test.
 * Header-only on purpose: each workload stays a single small C file. */
#ifndef TESSERA_BENCH_WL_COMMON_H
#define TESSERA_BENCH_WL_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct wl_options_s {
  double scale;      /* multiplies the amount of work                    */
  int threads;       /* worker threads (multi-threaded workloads)        */
  uint64_t seed;     /* fixed by default so every allocator sees the same */
  const char *mode;  /* workload-specific variant (--mode), may be NULL   */
  int argc;          /* remaining positional arguments                    */
  char **argv;
} wl_options_t;

static inline double wl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: tiny, fast and deterministic; quality is ample for picking
 * sizes and slots. State must be non-zero. */
static inline uint64_t wl_rand(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [lo, hi]. */
static inline size_t wl_rand_range(uint64_t *state, size_t lo, size_t hi) {
  return lo + (size_t)(wl_rand(state) % (uint64_t)(hi - lo + 1));
}

/* Roughly log-uniform in [lo, hi]: small sizes are common, large ones rare,
 * as in real programs. */
static inline size_t wl_rand_log(uint64_t *state, size_t lo, size_t hi) {
  unsigned lo_bits = 63u - (unsigned)__builtin_clzll(lo);
  unsigned hi_bits = 63u - (unsigned)__builtin_clzll(hi);
  unsigned bits = lo_bits + (unsigned)(wl_rand(state) % (hi_bits - lo_bits + 1));
  size_t base = (size_t)1 << bits;
  size_t size = base + (size_t)(wl_rand(state) % base);
  if (size < lo) size = lo;
  if (size > hi) size = hi;
  return size;
}

static inline void wl_fail(const char *what) {
  fprintf(stderr, "workload failure: %s\n", what);
  fflush(stdout);
  exit(3);
}

static inline void *wl_check(void *p, const char *what) {
  if (p == NULL) wl_fail(what);
  return p;
}

/* Scale a default count, never below min. */
static inline long wl_scaled(const wl_options_t *o, long base, long min) {
  double v = (double)base * o->scale;
  return v < (double)min ? min : (long)v;
}

static inline void wl_usage(const char *prog, const char *description) {
  printf("usage: %s [--scale F] [--threads N] [--seed S] [--mode M] [ARGS...]\n%s\n", prog,
         description);
}

/* Largest --scale: every workload's count (base x scale) stays far inside
 * a long (inf or 1e300 made that conversion undefined). */
#define WL_MAX_SCALE 1e6

/* Parses the common options, exiting with status 2 on bad input (0 on
 * --help). modes: the --mode values the program knows (NULL-terminated), or
 * NULL when it takes no --mode; max_args: how many positional arguments it
 * takes (0: any is an error, -1: no limit). */
static inline wl_options_t wl_parse_ex(int argc, char **argv, const char *description,
                                       const char *const *modes, int max_args) {
  wl_options_t o = {1.0, 1, 0x9E3779B97F4A7C15ULL, NULL, 0, NULL};
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      wl_usage(argv[0], description);
      exit(0);
    }
    if (!strcmp(a, "--")) { i++; break; }
    if (strncmp(a, "--", 2) != 0) break;
    if (i + 1 >= argc) {
      fprintf(stderr, "%s: option %s needs a value\n", argv[0], a);
      exit(2);
    }
    const char *v = argv[++i];
    char *end = NULL;
    /* strtoull and strtol skip blanks and take a sign (-1 wraps to 2^64-1):
     * a number must start with a digit (or a '.' for --scale). */
    int starts_ok = (v[0] >= '0' && v[0] <= '9') || (v[0] == '.' && !strcmp(a, "--scale"));
    errno = 0;
    if (!strcmp(a, "--scale")) {
      o.scale = strtod(v, &end);
      if (!starts_ok || *end || errno || !(o.scale > 0 && o.scale <= WL_MAX_SCALE)) {
        fprintf(stderr, "%s: bad --scale '%s' (a number above 0, at most %g)\n", argv[0], v, WL_MAX_SCALE);
        exit(2);
      }
    } else if (!strcmp(a, "--threads")) {
      long t = strtol(v, &end, 10);
      if (!starts_ok || *end || errno || t < 1 || t > 1024) {
        fprintf(stderr, "%s: bad --threads '%s' (1..1024)\n", argv[0], v);
        exit(2);
      }
      o.threads = (int)t;
    } else if (!strcmp(a, "--seed")) {
      o.seed = strtoull(v, &end, 0);
      if (!starts_ok || *end || errno || o.seed == 0) {
        fprintf(stderr, "%s: bad --seed '%s' (an integer from 1 to 2^64-1)\n", argv[0], v);
        exit(2);
      }
    } else if (!strcmp(a, "--mode")) {
      int known = 0;
      for (const char *const *m = modes; m && *m; m++) known |= !strcmp(*m, v);
      if (!known) {
        fprintf(stderr, "%s: unknown --mode '%s' (", argv[0], v);
        if (!modes || !modes[0]) fprintf(stderr, "this workload has no modes");
        for (const char *const *m = modes; m && *m; m++) fprintf(stderr, "%s%s", m == modes ? "one of " : ", ", *m);
        fprintf(stderr, ")\n");
        exit(2);
      }
      o.mode = v;
    } else {
      fprintf(stderr, "%s: unknown option %s\n", argv[0], a);
      wl_usage(argv[0], description);
      exit(2);
    }
  }
  o.argc = argc - i;
  o.argv = argv + i;
  if (max_args >= 0 && o.argc > max_args) {
    fprintf(stderr, "%s: unexpected argument '%s' (", argv[0], o.argv[max_args]);
    if (max_args == 0) fprintf(stderr, "this workload takes options only)\n");
    else fprintf(stderr, "at most %d)\n", max_args);
    wl_usage(argv[0], description);
    exit(2);
  }
  return o;
}

/* The common case: no --mode, no positional argument. */
static inline wl_options_t wl_parse(int argc, char **argv, const char *description) {
  return wl_parse_ex(argc, argv, description, NULL, 0);
}

/* The result lines every workload prints last. */
static inline void wl_report(double work_s, double ops) {
  printf("work_s=%.6f\n", work_s);
  if (ops > 0 && work_s > 0) printf("ops_per_s=%.0f\n", ops / work_s);
  fflush(stdout);
}

#endif
