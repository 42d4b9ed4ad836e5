/* driver: replays a parsed trace against one lab policy (or the system
 * allocator), checks every operation and measures it the way the malloc-lab
 * driver does.
 *
 * One driver_run() = one correctness pass (every op checked: alignment,
 * inside the simulated heap, no overlap with any live payload via a treap of
 * live intervals keyed by address, contents preserved, optional policy
 * checker) followed, unless check_only, by `runs` timed passes whose median
 * gives the throughput. Before each pass the heap is reset and the policy's
 * init() called. The workspace (driver_t) is allocated once and grown
 * between traces, never inside a replay loop.
 * Callers: tools/cmd_lab.c and tests/lab/test_driver*.c. */
#ifndef TESSERA_LAB_DRIVER_H
#define TESSERA_LAB_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "trace.h"

typedef struct driver_config_s {
  size_t align;         /* 8 or 16; 0 = per trace: 8 for classic headers, 16 otherwise */
  size_t check_every;   /* run policy->check() after every Nth op; 0 = only at the end */
  size_t check_budget;  /* at most this many checker runs per trace, evenly spaced, the
                           one at the end included (stretches check_every on long
                           traces); 0 = no limit. No effect when check_every is 0 */
  bool check_only;      /* correctness pass only: no timed passes */
  unsigned runs;        /* timed passes per trace (median); 0 = 1 */
  unsigned timeout_s;   /* each pass must end within this many seconds, or SIGALRM
                           is raised inside it (alarm(2)); 0 = no limit */
} driver_config_t;

#define DRIVER_ERR_MAX 640

typedef struct driver_result_s {
  bool valid;
  bool out_of_memory;   /* invalid because the heap cap was reached */
  bool has_util;        /* false for the system allocator (no simulated heap) */
  bool timed;
  bool scored_util;     /* the trace's weight counts it for utilization */
  bool scored_thru;     /* ... and for throughput */
  size_t align;
  double util;          /* peak live payload / heap size, 0-1 */
  uint64_t ops;
  uint64_t heap_bytes;  /* heap size at the end of the correctness pass */
  uint64_t checks;      /* policy->check() runs in the correctness pass (the end's included) */
  double secs;          /* median timed pass */
  char error[DRIVER_ERR_MAX];  /* "trace:line: op N (a 5 100): what" when !valid */
} driver_result_t;

typedef struct driver_totals_s {
  bool all_valid;
  bool has_util, has_thru, has_index;
  double util;          /* average over the traces scored for utilization */
  uint64_t ops;         /* over the traces scored for throughput */
  double secs;
  double kops;
  double perf_index;    /* 0-100; 0 when any trace is invalid */
} driver_totals_t;

typedef struct driver_s driver_t;

driver_t *driver_new(void);
void driver_free(driver_t *d);

/* The system allocator (libc malloc/free/realloc) as a pseudo-policy. */
const lab_policy_t *driver_system_policy(void);
bool driver_is_system(const lab_policy_t *policy);

/* Replay trace on policy. The simulated heap must be set up (mem_init_cap)
 * unless policy is the system allocator. Returns 0 when valid, 1 when an op
 * failed a check (out->error says which), -1 when the driver itself ran out
 * of memory (out->error says so). */
int driver_run(driver_t *d, const lab_policy_t *policy, const trace_t *trace,
               const driver_config_t *cfg, driver_result_t *out);

/* Combine per-trace results as the malloc-lab driver does: average
 * utilization, total ops / total seconds, and
 * perf index = 100 (0.6 util + 0.4 min(1, kops / reference_kops)).
 * reference_kops <= 0 leaves the index undefined (has_index false). */
void driver_totals(const driver_result_t *results, size_t n, double reference_kops,
                   driver_totals_t *out);

/* Write "trace:line: op N (policy P)" for the op the correctness pass is
 * replaying, or nothing outside a pass: for a crash report from a signal
 * handler (async-signal-safe: only write(2)). */
void driver_write_current_op(int fd);

/* True while a pass is replaying (a policy's code may be running): for an
 * exit handler, to tell a policy that called exit() from a finished run. */
bool driver_in_replay(void);

#endif
