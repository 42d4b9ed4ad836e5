/* api_park_rss.c — what an exited thread's parked heap keeps resident is
 * bounded.
 *
 * Since the eighteenth session an exited thread's default heap is parked
 * whole for the next new thread (tes_heap_park), its retired pages waiting
 * for their purge dates instead of being purged at the exit. With no bound,
 * a worker that freed 16 MiB just before it exited left all of it resident
 * until a new thread came, the purge delay passed on some other thread's
 * slow path, or malloc_trim: here, with the purge delay far longer than the
 * test, RSS stayed 16 MiB up after the join (and under mstress's thread
 * churn each parked heap's reserve only grew). Now a parked heap keeps its
 * newest retired pages up to 768 KiB (TES_PARK_RETAIN_BYTES, heap.c) and
 * the rest is purged at the park.
 *
 * The worker allocates and writes 8 MiB of small blocks and 8 MiB of medium
 * ones, then frees all of them but the first of each 4 MiB segment, which
 * stay live (freed by the main thread at the end): their segments stay in
 * use, so the emptied pages retire onto the heap's purge list rather than
 * going back to the segment cache with a whole free segment.
 *
 * First (twenty-first session), the bound counts what each retired page
 * carved, not its whole size (heap.c, retired_bytes). The hardened build
 * zeroes a retired page's capacity (no block of it passes a block test),
 * and retired_bytes read that zero as "carved by an earlier owner: all of
 * it": every retired page counted 64 KiB (512 KiB a medium one), and a
 * parked heap with a few lightly used classes purged pages that held a few
 * KiB, which the next thread faulted in again (mstress/8t: 1,487 madvise
 * calls a run against the default build's 432). A worker takes one page
 * each of 24 small classes (one extension, at most 8 KiB, carved in each),
 * keeps one more block live (so the segment stays in use and the emptied
 * pages go onto the purge list) and exits: the park must purge nothing
 * (os_purged_bytes); the hardened library of 6763de7 purged 128 KiB. */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <pthread.h>

#define SEGMENT ((uintptr_t)4 << 20) /* TES_SEGMENT_SIZE */
enum { SMALL_SIZE = 4000, MEDIUM_SIZE = 40000 };
enum { SMALL_COUNT = (8 << 20) / SMALL_SIZE, MEDIUM_COUNT = (8 << 20) / MEDIUM_SIZE, KEEP_MAX = 64 };

static void *keep[KEEP_MAX];
static int kept;
static int64_t rss_freed; /* the worker's RSS once it freed its blocks, before its exit */

/* Keep p live if it is the first block seen in its segment; true if kept. */
static bool keep_first_of_segment(void *p) {
  for (int i = 0; i < kept; i++)
    if (((uintptr_t)keep[i] & ~(SEGMENT - 1)) == ((uintptr_t)p & ~(SEGMENT - 1))) return false;
  if (kept == KEEP_MAX) return false;
  keep[kept++] = p;
  return true;
}

static void fill(void **blocks, int count, size_t size) {
  for (int i = 0; i < count; i++) {
    blocks[i] = malloc(size);
    REQUIRE(blocks[i] != NULL, "malloc(%zu)", size);
    memset(blocks[i], 0x5a, size);
  }
}

static void release(void **blocks, int count) {
  for (int i = 0; i < count; i++)
    if (!keep_first_of_segment(blocks[i])) free(blocks[i]);
}

enum { CARVED_CLASSES = 24, CARVED_PER_CLASS = 4 };
static void *carved_live;

static void *carved_worker(void *arg) {
  (void)arg;
  static void *blocks[CARVED_CLASSES][CARVED_PER_CLASS];
  carved_live = malloc(2000); /* a class of its own, beyond the ones below */
  REQUIRE(carved_live != NULL, "malloc(2000)");
  for (int c = 0; c < CARVED_CLASSES; c++) {
    size_t size = 16 + (size_t)c * 48; /* 16 .. 1120 B: 24 classes apart */
    fill(blocks[c], CARVED_PER_CLASS, size);
  }
  for (int c = 0; c < CARVED_CLASSES; c++)
    for (int i = 0; i < CARVED_PER_CLASS; i++) free(blocks[c][i]);
  return NULL;
}

/* Everything allocated before anything is freed: a heap about to map a new
 * segment purges its retired pages first (tes_heap_purge_for_growth). */
static void *worker(void *arg) {
  (void)arg;
  static void *small[SMALL_COUNT], *medium[MEDIUM_COUNT];
  fill(small, SMALL_COUNT, SMALL_SIZE);
  fill(medium, MEDIUM_COUNT, MEDIUM_SIZE);
  release(small, SMALL_COUNT);
  release(medium, MEDIUM_COUNT);
  rss_freed = api_rss_bytes();
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
  REQUIRE(pthread_create(&t, NULL, carved_worker, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  tes_stats_get(&after);
  uint64_t purged = after.os_purged_bytes - before.os_purged_bytes;
  printf("purged at the park: %llu KiB\n", (unsigned long long)(purged >> 10));
  CHECK(purged == 0, "the park purged %llu KiB of pages that carved at most %d x 8 KiB (bound 768 KiB)",
        (unsigned long long)(purged >> 10), CARVED_CLASSES);

  API_GROUP("parked heap's retired pages");
  int64_t rss_start = api_rss_bytes();
  REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  int64_t rss_parked = api_rss_bytes();
  printf("RSS: start %.1f MiB, worker's blocks freed %.1f MiB, heap parked %.1f MiB (%d blocks kept live)\n",
         (double)rss_start / MIB, (double)rss_freed / MIB, (double)rss_parked / MIB, kept);
  CHECK(rss_freed - rss_start >= 12 * MIB, "the worker's freed pages were resident before its exit (%.1f MiB)",
        (double)(rss_freed - rss_start) / MIB);
  /* Kept: 768 KiB of retired pages, the pages of the blocks kept live (one
   * a segment), the worker's stack, which glibc caches; 4 MiB is ample. */
  CHECK(rss_parked - rss_start <= 4 * MIB,
        "a parked heap kept %.1f MiB resident (its retired pages are bounded at 768 KiB)",
        (double)(rss_parked - rss_start) / MIB);

  API_GROUP("the next thread takes the heap");
  REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  for (int i = 0; i < kept; i++) free(keep[i]);
  free(carved_live);
  return api_finish("api_park_rss");
}
