/* unit_idle_head.c — a class in use is not taken for an idle one
 * (fifteenth session).
 *
 * The queue sweep retires a class head found empty at two sweeps a purge
 * delay apart (heap.c, queues_sweep). A thread whose every malloc of a
 * class is freed before the next (bins off, as in the hardened build) has
 * that head empty at each sweep, though it allocates from it all the time:
 * the head retired and was carved again about every other purge delay
 * (the hardened ping-pong of bench/fastpath went from 68.8 to 68.8-69.5
 * instructions a pair, varying with the clock). The sweep now also wants
 * the head's free list unmoved since its first look. A page that retires
 * folds its allocation count into the heap's counters (tes_heap_fold_page):
 * over 60 purge delays of ping-pong, that count must stay zero for the
 * class, while a class really left alone still retires (the same heap,
 * a second class, allocated once and freed). */
#include "unit_common.h"

#include "active_clock.h"
#include "internal.h"

#include <pthread.h>
#include <time.h>

#define DELAY_MS 5

static uint64_t folded_busy, folded_idle;
static unsigned long pairs;

static void *ping_pong(void *arg) {
  (void)arg;
  unsigned busy = tes_class_of(48), idle = tes_class_of(3000);
  void *once = tes_malloc(3000); /* its class then left alone */
  REQUIRE(once != NULL, "malloc failed");
  tes_free(once);
  tes_heap_t *heap = tes_tls_heap;
  /* 60 delays of the thread's own calls (twentieth session: on the wall
   * clock, a thread not run for the window's 300 ms left it with the idle
   * class's head not yet retired; active_clock.h). */
  active_clock_t clock;
  active_clock_start(&clock);
  while (active_clock_tick(&clock, DELAY_MS * 0.5e-3) < 60 * DELAY_MS * 1e-3) {
    for (int i = 0; i < 4096; i++) {
      volatile char *p = tes_malloc(48);
      REQUIRE(p != NULL, "malloc failed");
      p[0] = (char)i;
      tes_free((void *)p);
      pairs++;
    }
  }
  folded_busy = heap->counters.class_allocs[busy];
  folded_idle = heap->counters.class_allocs[idle];
  return NULL;
}

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, DELAY_MS) == 0, "cannot set the purge delay");
  REQUIRE(tes_option_set(TES_OPTION_BINS, 0) == 0, "cannot turn the bins off");
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, ping_pong, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  CHECK(folded_busy == 0, "the busy class's head retired under %lu malloc+free pairs (%llu allocations folded)", pairs,
        (unsigned long long)folded_busy);
  CHECK(folded_idle == 1, "the class left alone: %llu allocations folded, expected its head retired with 1",
        (unsigned long long)folded_idle);
  printf("%lu pairs; folded: busy class %llu, idle class %llu\n", pairs, (unsigned long long)folded_busy,
         (unsigned long long)folded_idle);
  return unit_failures ? 1 : 0;
}
