/* api_thread_reuse.c — a new thread takes over what an exited one left
 * resident, instead of it being purged at the exit and faulted in again.
 *
 * Generations of one thread, one after the other (mstress's thread churn):
 * each allocates small and medium blocks, frees them all itself and exits.
 * With a purge delay far longer than the test, nothing is due for purging
 * while it runs, so a `madvise` between the first generation's end and the
 * last one's is memory purged early: before the eighteenth session every
 * thread exit purged every page its heap had retired (tes_heap_abandon),
 * and the next generation, adopting the segments, faulted the same pages in
 * again (mstress/8t: 1,300 `madvise` calls and 10,000 faults a run). Now
 * an exited thread's heap is parked whole (tes_heap_park) and the next new
 * thread takes it over with its pages, dates and queues: no purge. The
 * second part checks that a forced collect still reaches a parked heap:
 * malloc_trim(0) abandons it, and the pages that the main thread's frees
 * of its blocks emptied are purged. */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <malloc.h>
#include <pthread.h>

enum { GENERATIONS = 12, THREADS = 2, SMALL = 3000, MEDIUM = 40, KEPT = 40, CARRY = 8 };

/* Blocks a worker leaves live for the next generation's worker to free, as
 * mstress's shared table does: they keep the segments in use, so the pages
 * a worker emptied are retired (and were purged at its exit) rather than
 * going back to the cache with a whole free segment. */
static void *carry[THREADS][CARRY];

static void *worker(void *arg) {
  void **mine = arg;
  void *small[SMALL], *medium[MEDIUM];
  for (int i = 0; i < CARRY; i++) free(mine[i]);
  for (int i = 0; i < SMALL; i++) {
    small[i] = malloc(16 + (size_t)(i * 37) % 240);
    if (small[i]) memset(small[i], 1, 16);
  }
  for (int i = 0; i < MEDIUM; i++) {
    medium[i] = malloc(4096 + (size_t)i * 1000);
    if (medium[i]) memset(medium[i], 1, 4096 + (size_t)i * 1000);
  }
  for (int i = 0; i < CARRY; i++) mine[i] = malloc(i % 2 ? 64 : 8192);
  for (int i = 0; i < SMALL; i++) free(small[i]);
  for (int i = 0; i < MEDIUM; i++) free(medium[i]);
  return NULL;
}

static void *kept[THREADS][KEPT];

static void *keeper(void *arg) {
  void **out = arg;
  for (int i = 0; i < KEPT; i++) out[i] = malloc(i % 2 ? 48 : 20000);
  return NULL;
}

/* One thread a generation: with two, the first could find the other's
 * parked heap still waiting when it wants a new segment, and take it
 * (fresh_page abandons the oldest parked heap then), which purges. */
static void generation(void) {
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, worker, carry[0]) == 0, "pthread_create");
  pthread_join(t, NULL);
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  if (!api_malloc_is_linked_tessera()) return 77;
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 100000) == 0, "purge delay");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_THREAD, 0) == 0, "purge thread");
  free(malloc(1)); /* the main thread's heap first */

  API_GROUP("exit purge");
  generation();
  tes_stats_t before, after;
  tes_stats_get(&before);
  for (int g = 1; g < GENERATIONS; g++) generation();
  tes_stats_get(&after);
  uint64_t calls = after.os_madvise_calls - before.os_madvise_calls;
  uint64_t bytes = after.os_purged_bytes - before.os_purged_bytes;
  printf("%d generations after the first: %" PRIu64 " madvise calls, %" PRIu64 " KiB purged\n", GENERATIONS - 1,
         calls, bytes >> 10);
  CHECK(calls == 0, "%" PRIu64 " madvise calls (%" PRIu64 " KiB) with nothing due: exited threads' pages purged",
        calls, bytes >> 10);

  API_GROUP("collect reaches parked heaps");
  /* One more generation whose blocks the main thread frees after the
   * threads are gone: their pages empty on remote stacks that no thread
   * collects while the heaps are parked. malloc_trim must still give them
   * back. */
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, keeper, &kept[i]) == 0, "pthread_create");
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++)
    for (int j = 0; j < KEPT; j++) free(kept[i][j]);
  tes_stats_get(&before);
  malloc_trim(0);
  tes_stats_get(&after);
  printf("malloc_trim: committed %.2f -> %.2f MiB\n", (double)before.committed.current / MIB,
         (double)after.committed.current / MIB);
  CHECK(before.committed.current - after.committed.current >= MIB,
        "malloc_trim gave back %.1f KiB of the pages exited threads' blocks emptied",
        (double)(before.committed.current - after.committed.current) / 1024);
  return api_finish("api_thread_reuse");
}
