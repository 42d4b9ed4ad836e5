/* fit_bench.h — what the fit-policy workloads share: command line
 * (--impl ff|bf|malloc|null, --naive, --iters N, --seed N), the allocator they drive, the
 * clock, and the one result line they print.
 *
 * Every workload prints, like the assignment's programs,
 *     Execution Time = <seconds> seconds
 *     Fragmentation  = <free space / data segment size>
 * followed by one machine-readable line for the matrix driver:
 *     result workload=<name> impl=<ff|bf|malloc|null> variant=<naive|fast|system|null>
 *            iters=<n> time_s=<wall> cpu_s=<cpu> fragmentation=<f|n/a> segment=<bytes> free=<bytes>
 *            minflt=<minor page faults during the timed loop>
 * For --impl malloc the fragmentation comes from mallinfo2 (fordblks /
 * arena) of the malloc in use when its mallinfo2 follows the allocations
 * (glibc's; libtessera's, under LD_PRELOAD, answers for its own heap), and
 * is "n/a" when it does not (a preloaded allocator that leaves glibc's
 * mallinfo2 in place, such as mimalloc). --impl null allocates nothing
 * (one dummy address for every request; fragmentation n/a): the workload's
 * own share of a run. Under valgrind --tool=callgrind --collect-atstart=no
 * only the timed loop is counted (fit_bench_start / fit_bench_finish toggle
 * collection).
 */
#ifndef TESSERA_FIT_BENCH_H
#define TESSERA_FIT_BENCH_H

#include <stddef.h>

typedef struct fit_bench {
  const char *workload;
  const char *impl;    /* ff, bf, malloc or null */
  const char *variant; /* naive, fast, system or null */
  long iters;
  unsigned seed; /* srand seed of the random workloads (the assignment's: 0) */
  void *(*alloc)(size_t);
  void (*release)(void *);
  double start;
} fit_bench_t;

/* Parses argv; exits with a usage message (status 2) on bad options, or
 * after printing the usage on stdout (status 0) for --help.
 * default_iters is the assignment's iteration count. */
void fit_bench_init(fit_bench_t *fb, const char *workload, long default_iters, int argc, char **argv);
double fit_bench_now(void);
void fit_bench_start(fit_bench_t *fb);
/* Records data segment size and free space now (the moment the workload
 * samples fragmentation). */
void fit_bench_sample(fit_bench_t *fb);
/* Stops the clock and prints the result lines. */
void fit_bench_finish(fit_bench_t *fb);

#endif
