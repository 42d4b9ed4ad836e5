/* active_clock.h — a clock of the time a test was making calls, for tests
 * that wait for the allocator's delayed work (purges, queue sweeps): that
 * work runs on the allocator's slow paths, not on a timer, so a window on
 * the wall clock can pass without it when the machine does not run the
 * test (a loaded machine, a SIGSTOP): lib.api_idle_class_rss failed so
 * once in 53 runs (docs/RELIABILITY.md, twentieth session). Each tick adds
 * the time since the last one, but at most `cap` seconds: a pause counts
 * as `cap` only, so a window measured on this clock holds calls throughout
 * however long it takes on the wall clock. No allocation. */
#ifndef TESSERA_TESTS_ACTIVE_CLOCK_H
#define TESSERA_TESTS_ACTIVE_CLOCK_H

#include <time.h>

typedef struct {
  double last, active;
} active_clock_t;

static inline double active_clock_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void active_clock_start(active_clock_t *clock) {
  clock->last = active_clock_now();
  clock->active = 0;
}

/* The active seconds since active_clock_start, after this tick. */
static inline double active_clock_tick(active_clock_t *clock, double cap) {
  double now = active_clock_now(), gap = now - clock->last;
  clock->active += gap < cap ? gap : cap;
  clock->last = now;
  return clock->active;
}

#endif
