/* fit_bench.c — option parsing, clock and reporting for the fit workloads
 * (see fit_bench.h). The allocator is called through a function pointer for
 * every --impl, so the three are measured with the same call overhead.
 */
#define _GNU_SOURCE
#include "fit_bench.h"

#include "my_malloc.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* Under valgrind --tool=callgrind --collect-atstart=no, only the timed loop
 * is counted: fit_bench_start and fit_bench_finish toggle collection (a
 * no-op outside valgrind; skipped when the headers are not installed). */
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define FIT_TOGGLE_COLLECT() CALLGRIND_TOGGLE_COLLECT
#endif
#endif
#ifndef FIT_TOGGLE_COLLECT
#define FIT_TOGGLE_COLLECT() ((void)0)
#endif

/* --iters cap: the largest default is 60,000; a billion is hours already. */
#define FIT_MAX_ITERS 1000000000L

static unsigned long sampled_segment, sampled_free;
static int sampled, sampled_valid = 1;
static double end_time, cpu_start, cpu_end;
static long minflt_start, minflt_end; /* minor page faults of the process */

/* CPU seconds of this process: on a shared, oversubscribed machine the wall
 * clock also counts time spent waiting for a core. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long minor_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

static void print_usage(FILE *out, const char *prog) {
  fprintf(out,
          "usage: %s [--impl ff|bf|malloc|null] [--naive] [--iters N] [--seed N]\n"
          "  --impl    allocator: first fit, best fit (libmymalloc), plain malloc (default bf),\n"
          "            or null (allocates nothing: the workload's own cost)\n"
          "  --naive   the linear-scan versions (same as TESSERA_FIT_IMPL=naive)\n"
          "  --iters   iterations of the workload (default: the assignment's)\n"
          "  --seed    srand seed of the random workloads (default 0, the assignment's)\n",
          prog);
}

/* A usage error: what is wrong, the usage, status 2. */
static void usage(const char *prog, const char *why) {
  fprintf(stderr, "%s: %s\n", prog, why);
  print_usage(stderr, prog);
  exit(2);
}

/* The value of the option at argv[*i], which must have one. */
static const char *option_value(int argc, char **argv, int *i, const char *why) {
  if (*i + 1 >= argc) usage(argv[0], why);
  return argv[++*i];
}

static void free_plain(void *p) { free(p); }
static void *malloc_plain(size_t n) { return malloc(n); }
/* --impl null: every request gets the same dummy address and nothing is
 * freed, so a run measures the workload's own loop (the calls through the
 * function pointer included). The workloads never write their blocks. */
static _Alignas(16) char null_block[16];
static __attribute__((noinline)) void *alloc_null(size_t n) {
  (void)n;
  return null_block;
}
static __attribute__((noinline)) void release_null(void *p) { (void)p; }

void fit_bench_init(fit_bench_t *fb, const char *workload, long default_iters, int argc, char **argv) {
  memset(fb, 0, sizeof *fb);
  fb->workload = workload;
  fb->impl = "bf";
  fb->iters = default_iters;
  int naive = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--impl") == 0) {
      fb->impl = option_value(argc, argv, &i, "--impl needs a value: ff, bf, malloc or null");
    } else if (strcmp(argv[i], "--naive") == 0) {
      naive = 1;
    } else if (strcmp(argv[i], "--iters") == 0) {
      const char *v = option_value(argc, argv, &i, "--iters needs a positive integer");
      char *end;
      errno = 0;
      fb->iters = strtol(v, &end, 10);
      /* errno: 99999999999999999999 clamps to LONG_MAX (ERANGE), which
       * would run for ever; a leading blank or sign is no integer either. */
      if (!(v[0] >= '0' && v[0] <= '9') || *end || errno || fb->iters <= 0 || fb->iters > FIT_MAX_ITERS)
        usage(argv[0], "--iters needs a positive integer, at most 1000000000");
    } else if (strcmp(argv[i], "--seed") == 0) {
      const char *v = option_value(argc, argv, &i, "--seed needs an integer from 0 to 4294967295");
      char *end;
      errno = 0;
      unsigned long seed = strtoul(v, &end, 10);
      if (!(v[0] >= '0' && v[0] <= '9') || *end || errno || seed > 0xffffffffUL) usage(argv[0], "--seed needs an integer from 0 to 4294967295");
      fb->seed = (unsigned)seed;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      print_usage(stdout, argv[0]);  /* asked for: not an error */
      exit(0);
    } else {
      usage(argv[0], "unknown option");
    }
  }
  if (naive) setenv("TESSERA_FIT_IMPL", "naive", 1); /* read at the first ff/bf call */
  const char *env = getenv("TESSERA_FIT_IMPL");
  int is_naive = env && strcmp(env, "naive") == 0;
  if (strcmp(fb->impl, "ff") == 0) {
    fb->alloc = ff_malloc;
    fb->release = ff_free;
    fb->variant = is_naive ? "naive" : "fast";
  } else if (strcmp(fb->impl, "bf") == 0) {
    fb->alloc = bf_malloc;
    fb->release = bf_free;
    fb->variant = is_naive ? "naive" : "fast";
  } else if (strcmp(fb->impl, "null") == 0) {
    fb->alloc = alloc_null;
    fb->release = release_null;
    fb->variant = "null";
  } else if (strcmp(fb->impl, "malloc") == 0) {
    fb->alloc = malloc_plain;
    fb->release = free_plain;
    fb->variant = "system";
  } else {
    usage(argv[0], "--impl must be ff, bf, malloc or null");
  }
}

double fit_bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void fit_bench_start(fit_bench_t *fb) {
  minflt_start = minor_faults();
  cpu_start = cpu_now();
  fb->start = fit_bench_now();
  FIT_TOGGLE_COLLECT();
}

/* Does mallinfo2 describe the malloc in use? glibc's does, and so does a
 * preloaded allocator that answers mallinfo2 itself (libtessera); one that
 * leaves glibc's in place (mimalloc) would report glibc's idle heap. */
static int mallinfo2_follows_malloc(void) {
  struct mallinfo2 before = mallinfo2();
  void *p = malloc(4000);
  struct mallinfo2 after = mallinfo2();
  free(p);
  return after.uordblks >= before.uordblks + 4000;
}

void fit_bench_sample(fit_bench_t *fb) {
  sampled = 1;
  if (fb->alloc == malloc_plain) {
    struct mallinfo2 mi = mallinfo2();
    sampled_segment = mi.arena;
    sampled_free = mi.fordblks;
  } else {
    sampled_segment = get_data_segment_size();
    sampled_free = get_data_segment_free_space_size();
  }
}

void fit_bench_finish(fit_bench_t *fb) {
  FIT_TOGGLE_COLLECT();
  end_time = fit_bench_now();
  cpu_end = cpu_now();
  minflt_end = minor_faults();
  if (!sampled) fit_bench_sample(fb);
  if (fb->alloc == malloc_plain && !mallinfo2_follows_malloc()) sampled_valid = 0;
  double t = end_time - fb->start;
  char frag[32] = "n/a";
  if (sampled_valid && sampled_segment > 0)
    snprintf(frag, sizeof frag, "%f", (double)sampled_free / (double)sampled_segment);
  printf("Execution Time = %f seconds\n", t);
  printf("Fragmentation  = %s\n", frag);
  printf("result workload=%s impl=%s variant=%s iters=%ld time_s=%f cpu_s=%f fragmentation=%s segment=%lu free=%lu minflt=%ld\n",
         fb->workload, fb->impl, fb->variant, fb->iters, t, cpu_end - cpu_start, frag, sampled_segment, sampled_free,
         minflt_end - minflt_start);
}
