/* api_large_front_race.c — the hardened build's waiting front (src/large.c,
 * purge_front) purged by another thread while the block's owner reallocs
 * it in place. A large block placed in a cached segment that a longer block
 * dirtied leaves that front on the tail list for one purge delay; any
 * thread's tes_large_purge_tails then purges it and counts it in the
 * segment's purged_bytes, under large_lock. The owner's realloc in place
 * (grown: note_unpurged; shrunk with a purge behind it: note_purged) and
 * its discard before a free update purged_bytes too, and did so without
 * the lock: one of the two read-modify-writes could be lost, `committed`
 * drifting for good, and ThreadSanitizer reported the race. Each round:
 * a 3.5 MiB block dirties a segment and is freed; a 1.8 MiB block takes
 * that segment (the front, about 1.7 MiB, waits); the main thread shrinks
 * and grows it in place for several purge delays (checking that it stays
 * in place with its contents) while a second thread runs tes_collect(false),
 * which purges due fronts. Run under TSan (sanitize.lib_large_front_race,
 * the hardened library) and in the main build (lib.api_large_front_race,
 * both libraries), where the committed gauge must come back to where it
 * started once everything is freed and collected. tes_* calls only. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define BIG ((size_t)3500 << 10)
#define LONG_SIZE ((size_t)1800 << 10)
#define SHORT_SIZE ((size_t)1200 << 10)
#define UNIT ((uintptr_t)4 << 20)
#define DELAY_MS 4

static atomic_int stop;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *purger(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) tes_collect(false); /* due fronts: tes_cache_purge -> tes_large_purge_tails */
  return NULL;
}

int main(void) {
  API_GROUP("a waiting front purged by another thread while its block is realloc'd in place");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, DELAY_MS) == 0, "purge delay");
  tes_free(tes_malloc(1));
  /* A thread started and joined first: what the C library allocates for a
   * thread (and keeps for the next one) is live before the first reading. */
  pthread_t t;
  atomic_store(&stop, 1);
  REQUIRE(pthread_create(&t, NULL, purger, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  atomic_store(&stop, 0);
  tes_collect(true); /* an empty segment cache */
  tes_stats_t s0, s1;
  tes_stats_get(&s0);
  REQUIRE(pthread_create(&t, NULL, purger, NULL) == 0, "pthread_create");
  int reused = 0, moved = 0, wrong = 0;
  for (int round = 0; round < 24; round++) {
    unsigned char *big = tes_malloc(BIG);
    REQUIRE(big != NULL, "tes_malloc(BIG)");
    memset(big, 0xA5, BIG);
    uintptr_t unit = (uintptr_t)big & ~(UNIT - 1);
    tes_free(big);
    unsigned char *b = tes_malloc(LONG_SIZE);
    REQUIRE(b != NULL, "tes_malloc(LONG_SIZE)");
    if (((uintptr_t)b & ~(UNIT - 1)) == unit) reused++;
    memset(b, 0x3C, LONG_SIZE);
    double t0 = now_ms();
    for (int k = 0; now_ms() - t0 < 12 * DELAY_MS; k++) {
      size_t n = k % 2 ? LONG_SIZE : SHORT_SIZE;
      unsigned char *c = tes_realloc(b, n);
      REQUIRE(c != NULL, "tes_realloc");
      if (c != b) moved++;
      b = c;
      if (n == LONG_SIZE) memset(b + SHORT_SIZE, 0x3C, LONG_SIZE - SHORT_SIZE);
      for (size_t i = 0; i < SHORT_SIZE; i += 4096) wrong += b[i] != 0x3C;
    }
    tes_free(b);
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  CHECK(reused >= 12, "the short block took the long one's segment in %d of 24 rounds", reused);
  CHECK(wrong == 0, "%d pages of the block changed under reallocs in place", wrong);
  (void)moved; /* the default build grows in place or by mremap: either keeps the contents */

  API_GROUP("committed comes back once everything is freed");
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(s1.committed.current == s0.committed.current, "committed %lld before, %lld after (%+lld)",
        (long long)s0.committed.current, (long long)s1.committed.current,
        (long long)(s1.committed.current - s0.committed.current));
  return api_finish("api_large_front_race");
}
