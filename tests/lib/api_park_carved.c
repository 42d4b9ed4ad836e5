/* api_park_carved.c — a parked heap's trim counts what its retired pages
 * carved, not their whole size.
 *
 * At its park an exited thread's heap keeps its newest retired pages up to
 * 768 KiB (TES_PARK_RETAIN_BYTES, heap.c, park_trim) and purges the rest,
 * each page counted by what it can hold resident: the blocks carved in it
 * (retired_bytes). The hardened build zeroes a retired page's capacity (no
 * block of it passes a block test any more), and until the twenty-first
 * session retired_bytes read that zero as "carved by an earlier owner:
 * all of it": every retired page counted 64 KiB (512 KiB a medium one), and
 * a parked heap with a few lightly used classes purged pages that held a few
 * KiB, which the next thread faulted in again (mstress/8t: 1,487 madvise
 * calls a run against the default build's 432; 12,600 minor faults against
 * 9,850 since).
 *
 * The worker allocates four blocks of each of 24 small classes (one page
 * each, one extension of at most 8 KiB carved), keeps one more block live
 * (freed by the main thread at the end, so the segment stays in use and its
 * emptied pages go onto the purge list, not with the segment to the cache),
 * frees the rest and exits. Its 24 retired pages carved at most 24 x 8 KiB:
 * well below the bound, so the park purges nothing (os_purged_bytes does
 * not move); counted whole, the park purged 128 KiB of them (the hardened
 * library of 6763de7; the default build's: nothing). The purge delay is far
 * longer than the test, so nothing is due. */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <pthread.h>

enum { CLASSES = 24, PER_CLASS = 4 };

static void *live_block;

static void *worker(void *arg) {
  (void)arg;
  static void *blocks[CLASSES][PER_CLASS];
  live_block = malloc(2000); /* a class of its own, beyond the ones below */
  REQUIRE(live_block != NULL, "malloc(2000)");
  for (int c = 0; c < CLASSES; c++) {
    size_t size = 16 + (size_t)c * 48; /* 16 .. 1120 B: 24 classes apart */
    for (int i = 0; i < PER_CLASS; i++) {
      blocks[c][i] = malloc(size);
      REQUIRE(blocks[c][i] != NULL, "malloc(%zu)", size);
      memset(blocks[c][i], 0x5a, size);
    }
  }
  for (int c = 0; c < CLASSES; c++)
    for (int i = 0; i < PER_CLASS; i++) free(blocks[c][i]);
  return NULL;
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  if (!api_malloc_is_linked_tessera()) return 77;
  if (tes_option_get(TES_OPTION_HEAP_PARK) == 0) return 77; /* TESSERA_HEAP_PARK=0: abandoned at the exit */
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 100000) == 0, "purge delay");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_THREAD, 0) == 0, "purge thread");
  free(malloc(1)); /* the main thread's heap first */

  API_GROUP("a parked heap's lightly carved retired pages stay");
  tes_stats_t before, after;
  tes_stats_get(&before);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  tes_stats_get(&after);
  uint64_t purged = after.os_purged_bytes - before.os_purged_bytes;
  printf("purged at the worker's park: %llu KiB\n", (unsigned long long)(purged >> 10));
  CHECK(purged == 0, "the park purged %llu KiB of pages that carved at most %d x 8 KiB (bound 768 KiB)",
        (unsigned long long)(purged >> 10), CLASSES);
  free(live_block);
  return api_finish("api_park_carved");
}
