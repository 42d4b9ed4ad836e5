/* Running one workload process and measuring it: fork, set or clear
 * LD_PRELOAD, exec; capture stdout and stderr through pipes; sample VmRSS
 * from /proc/<pid>/status while it runs (optional); kill the whole process
 * group at the timeout; reap with wait4 for user/sys CPU time and peak RSS;
 * wall time from the monotonic clock, taken when the kernel reports the exit
 * (pidfd), not at the next poll tick; optionally a perf-event counter
 * (instructions) over the process and its threads and children.
 * Invariants: every process started here is reaped before bench_spawn
 * returns, and its process group is killed, so no workload outlives its
 * measurement (redis-server included). Called by tools/cmd_bench.c. */
#ifndef TESSERA_BENCH_PROC_H
#define TESSERA_BENCH_PROC_H

#include <stddef.h>

#define BENCH_EXIT_UNAVAILABLE 77 /* workload: "not installed here" */

/* A counter read from the kernel's perf events for the whole process tree
 * (inherit), counting from exec (enable_on_exec), user space only. */
typedef enum bench_counter_e {
  BENCH_COUNT_NONE,
  BENCH_COUNT_INSTRUCTIONS, /* hardware: absent in many VMs (then -1) */
  BENCH_COUNT_TASK_CLOCK    /* software, nanoseconds: lets tests check the mechanism */
} bench_counter_t;

typedef struct bench_spawn_s {
  char *const *argv;       /* argv[0] is the program path */
  const char *preload;     /* shared object for LD_PRELOAD, NULL = none; a path
                            * with a space or a colon is refused (status error) */
  double timeout_s;
  double sample_every_s;   /* > 0: sample VmRSS this often */
  bench_counter_t counter;
} bench_spawn_t;

typedef struct bench_outcome_s {
  double wall_s, user_s, sys_s;
  long maxrss_kib;
  char status[32];         /* ok | exit:N | signal:NAME | timeout | skipped | error */
  char *out;               /* captured stdout, NUL-terminated (malloc'd) */
  char *err;               /* captured stderr, NUL-terminated (malloc'd) */
  double *sample_t;        /* RSS samples: seconds since start ... */
  long *sample_kib;        /* ... and VmRSS in KiB (malloc'd, n_samples each) */
  size_t n_samples;
  long long counter;       /* value of spec->counter; -1 when unavailable */
} bench_outcome_t;

/* Runs the process to completion (or timeout). Returns 0 when it ran (see
 * status for how it ended) and -1 when it could not be started (status
 * "error", err holds why). Free the outcome with bench_outcome_free. */
int bench_spawn(const bench_spawn_t *spec, bench_outcome_t *outcome);

void bench_outcome_free(bench_outcome_t *outcome);

/* Kills the process group of the run in progress, if any. Async-signal-safe:
 * for the runner's SIGINT/SIGTERM handler, since a workload runs in its own
 * process group and would not see the terminal's Ctrl-C. */
void bench_kill_current(void);

/* "SIGSEGV" for 11, ...; "SIG<n>" for unknown numbers (static buffer). */
const char *bench_signal_name(int sig);

#endif
