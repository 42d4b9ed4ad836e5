/* api_heap_destroy_mt.c — tes_heap_destroy from another thread while the
 * heap's thread goes on allocating and freeing. A first-class heap's pages
 * are listed in its thread's slice table (the free fast path), which that
 * thread updates as it takes and retires pages and frees through the slow
 * path; a destroy that cleared the heap's entries from another thread wrote
 * the table under it, a data race that ThreadSanitizer reports
 * (sanitize.lib_heap_destroy_race, the default library: tes_* calls only).
 * Each round the main thread fills a heap with blocks of many sizes and
 * hands it to a second thread, which destroys it, while the main thread
 * allocates, checks and frees blocks of its own default heap. In the main
 * build (lib.api_heap_destroy_mt and .secure) it checks that the main
 * thread's blocks are untouched and that the destroyed heaps' blocks are
 * all freed once the main thread has run tes_collect (the point at which
 * the header says a heap another thread destroyed is emptied, at the
 * latest): bytes in use back where they started. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define ROUNDS 200
#define HEAP_BLOCKS 400
#define OWN_BLOCKS 300
/* 72 MiB of 1 KiB blocks: the thread's own pages then take every slot of
 * its slice table (1,024 slots of 64 KiB slices: 64 MiB), so the slots of
 * a heap's new pages are slots its own frees use too. */
#define SPREAD_BLOCKS (72 * 1024)
#define SPREAD_SIZE 1000

static tes_heap_t *_Atomic handed;
static atomic_int destroyed;

static void *destroyer(void *arg) {
  (void)arg;
  for (int r = 0; r < ROUNDS; r++) {
    tes_heap_t *h;
    while ((h = atomic_exchange(&handed, NULL)) == NULL) sched_yield();
    tes_heap_destroy(h);
    atomic_store(&destroyed, r + 1);
  }
  return NULL;
}

static void *idle(void *arg) { return arg; }

static size_t size_of(int i, int r) { return 16 + (size_t)((i * 37 + r * 11) % 3000); }

int main(void) {
  API_GROUP("another thread destroys a heap while its thread allocates and frees");
  tes_free(tes_malloc(1));
  /* A thread started and joined first: what the C library allocates for a
   * thread (and keeps for the next one) is live before the first reading. */
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, idle, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  tes_collect(true);
  tes_stats_t s0, s1;
  tes_stats_get(&s0);
  static unsigned char *spread[SPREAD_BLOCKS];
  for (int i = 0; i < SPREAD_BLOCKS; i++) {
    spread[i] = tes_malloc(SPREAD_SIZE);
    REQUIRE(spread[i] != NULL, "tes_malloc");
    spread[i][0] = (unsigned char)i;
  }
  REQUIRE(pthread_create(&t, NULL, destroyer, NULL) == 0, "pthread_create");
  static unsigned char *own[OWN_BLOCKS];
  int wrong = 0;
  for (int r = 0; r < ROUNDS; r++) {
    tes_heap_t *h = tes_heap_new();
    REQUIRE(h != NULL, "tes_heap_new");
    for (int i = 0; i < HEAP_BLOCKS; i++) {
      unsigned char *p = tes_heap_malloc(h, size_of(i, r));
      REQUIRE(p != NULL, "tes_heap_malloc");
      memset(p, 0x5A, size_of(i, r));
    }
    atomic_store(&handed, h);
    /* Our own blocks while it is destroyed: pages taken and retired, frees
     * through the slice table and past it (a slot the heap's page took is
     * taken back), one block of every 64 KiB of the spread replaced. */
    int at = 0;
    do {
      for (int k = 0; k < 64; k++, at = (at + 64) % SPREAD_BLOCKS) {
        wrong += spread[at][0] != (unsigned char)at;
        tes_free(spread[at]);
        spread[at] = tes_malloc(SPREAD_SIZE);
        REQUIRE(spread[at] != NULL, "tes_malloc");
        spread[at][0] = (unsigned char)at;
      }
      for (int i = 0; i < OWN_BLOCKS; i++) {
        own[i] = tes_malloc(size_of(i, r + 1));
        REQUIRE(own[i] != NULL, "tes_malloc");
        memset(own[i], i & 0xff, size_of(i, r + 1));
      }
      for (int i = 0; i < OWN_BLOCKS; i++) {
        for (size_t k = 0; k < size_of(i, r + 1); k += 64) wrong += own[i][k] != (unsigned char)(i & 0xff);
        tes_free(own[i]);
      }
    } while (atomic_load(&destroyed) <= r);
  }
  pthread_join(t, NULL);
  for (int i = 0; i < SPREAD_BLOCKS; i++) {
    wrong += spread[i][0] != (unsigned char)i;
    tes_free(spread[i]);
  }
  CHECK(wrong == 0, "%d bytes of the thread's own blocks changed", wrong);

  API_GROUP("the destroyed heaps' blocks are freed");
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(s1.in_use.current == s0.in_use.current, "in use %lld before, %lld after",
        (long long)s0.in_use.current, (long long)s1.in_use.current);
  return api_finish("api_heap_destroy_mt");
}
