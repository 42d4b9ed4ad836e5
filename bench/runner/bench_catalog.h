/* What the suite can run: the workload catalog and the allocator registry.
 *
 * A workload is a program plus fixed arguments; a threaded workload expands
 * into one "row" per thread count. An allocator is a name plus the shared
 * object to preload (none for the system allocator). Both tables are static
 * and listed by `tessera bench --list`; discovery (which peers are
 * installed, where libtessera.so and the workload binaries are) happens at
 * run time from the directory of the `tessera` binary. Called by
 * tools/cmd_bench.c. */
#ifndef TESSERA_BENCH_CATALOG_H
#define TESSERA_BENCH_CATALOG_H

#include <limits.h>
#include <stddef.h>

typedef enum bench_threading_e {
  BENCH_THREADS_NONE,    /* single-threaded: one row, threads = 1              */
  BENCH_THREADS_SCALED,  /* rows at 1x, 2x and 4x the cores (--quick: 1x only) */
  BENCH_THREADS_CORES    /* one row at the number of cores                     */
} bench_threading_t;

typedef enum bench_source_e {
  BENCH_SRC_OWN,     /* bench/workloads program, takes --scale/--threads/--mode */
  BENCH_SRC_FIT,     /* bench/fit program: --impl malloc --iters N               */
  BENCH_SRC_TRACES   /* bench_traces with trace files found at run time          */
} bench_source_t;

typedef struct bench_workload_s {
  const char *name;
  const char *group;         /* seed, fit, traces, mt, memory, real */
  const char *program;       /* binary name */
  const char *mode;          /* --mode argument, or NULL */
  bench_source_t source;
  bench_threading_t threading;
  int rss_series;            /* sample RSS over time and chart it */
  long fit_iters;            /* BENCH_SRC_FIT: --iters at scale 1 (about 0.5 s) */
  const char *description;
} bench_workload_t;

extern const bench_workload_t bench_workloads[];
extern const size_t bench_workload_count;

const bench_workload_t *bench_find_workload(const char *name);

typedef struct bench_allocator_s {
  char name[64];
  char path[PATH_MAX];       /* "" for the system allocator (no preload) */
  const char *install_hint;  /* how to get it when absent, or NULL */
  int available;
} bench_allocator_t;

/* Fills out[] (capacity max) with the known allocators in their default
 * order — system, tessera, jemalloc, tcmalloc, mimalloc — each marked
 * available or not. tessera is looked for in bin_dir. Returns the count. */
size_t bench_known_allocators(const char *bin_dir, bench_allocator_t *out, size_t max);

/* Path of a workload's binary, searched in bin_dir/bench, bin_dir/bench/fit
 * and bin_dir; returns 1 and fills path when found and executable. */
int bench_workload_program(const char *bin_dir, const bench_workload_t *w, char *path, size_t len);

/* The trace sets to replay: directories under ../shared/traces (next to the
 * source tree) holding *.rep files. Returns the number of sets found, each
 * set's directory in dirs[i] (capacity max). */
size_t bench_trace_sets(char dirs[][PATH_MAX], size_t max);
/* Where bench_trace_sets looks: $TESSERA_TRACES_DIR, else ../shared/traces
 * beside the source tree (for messages that name it). */
const char *bench_traces_root(void);

/* The *.rep files of one set, sorted, malloc'd strings in files[] (capacity
 * max): the first max by name when there are more. Returns the count kept;
 * *total (when not NULL) gets the number of files the set holds. */
size_t bench_trace_files(const char *dir, char **files, size_t max, size_t *total);

/* The source tree this runner was built from (for .venv, plot.py, shared/). */
const char *bench_source_dir(void);

#endif
