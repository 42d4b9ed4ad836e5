/* api_large_xfree.c — large blocks freed by other threads than their
 * allocators, while they are realloc'd and trimmed.
 *
 * Four threads swap large blocks (random sizes of 128 KiB-4 MiB, and one
 * fixed 200 KiB size that the segment cache matches exactly) through a
 * shared table: each takes a slot's block, checks its stamps, frees it or
 * reallocs it, and puts a new one in. Most frees are of another thread's
 * block, which tes_free_slow settles itself since the fourteenth session
 * (tes_large_owned_block, not free_checked); the reallocs go through the
 * waiting tails (tail_cancel) and the cache; a fifth thread trims
 * (tes_collect) all along, purging cached segments and waiting tails under
 * the others. Afterwards: no block lost a stamp, the large in-use gauge is
 * back to 0, and once everything is given back (tes_collect(true)) the
 * committed gauge is where it was before (a lost update of a segment's
 * purged_bytes drifts it). Uses the tes_* names, so that the sanitizer tree
 * runs it too (sanitize.lib_large_xfree, TSan). */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <stdatomic.h>

enum { THREADS = 4, SLOTS = 48, STEPS = 15000 };
#define MIN_SIZE ((size_t)128 << 10)
#define SPAN ((size_t)4 << 20)

typedef struct stamp_s {
  size_t size;
  unsigned slot;
} stamp_t;

static _Atomic(unsigned char *) table[SLOTS];
static _Atomic long stamp_errors, failed_calls;
static _Atomic int workers_left;

static void stamp(unsigned char *p, size_t size, unsigned slot) {
  stamp_t s = {size, slot};
  memcpy(p, &s, sizeof s);
  p[size - 1] = (unsigned char)(slot * 7 + 1);
}

/* A block as stamped; its size, or 0 when a stamp is wrong. */
static size_t stamped_size(const unsigned char *p, unsigned slot) {
  stamp_t s;
  memcpy(&s, p, sizeof s);
  if (s.slot != slot || s.size < sizeof s || p[s.size - 1] != (unsigned char)(slot * 7 + 1)) return 0;
  return s.size;
}

static size_t next_size(unsigned *seed) {
  *seed = *seed * 1103515245u + 12345u;
  if ((*seed >> 16) % 4 == 0) return 200000;
  return MIN_SIZE + ((size_t)(*seed >> 4) * 2654435761u) % SPAN;
}

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 2246822519u + 1;
  for (int i = 0; i < STEPS; i++) {
    size_t size = next_size(&seed);
    unsigned slot = (seed >> 7) % SLOTS;
    unsigned char *old = atomic_exchange(&table[slot], NULL);
    unsigned char *p;
    if (old != NULL && (seed >> 3) % 3 == 0) {
      /* Grown or shrunk in place or moved: its stamp must come along. */
      size_t had = stamped_size(old, slot);
      if (had == 0) atomic_fetch_add(&stamp_errors, 1);
      p = tes_realloc(old, size);
      if (p == NULL) {
        atomic_fetch_add(&failed_calls, 1);
        tes_free(old);
        continue;
      }
      stamp_t s;
      memcpy(&s, p, sizeof s);
      if (had != 0 && s.slot != slot) atomic_fetch_add(&stamp_errors, 1);
    } else {
      if (old != NULL) {
        if (stamped_size(old, slot) == 0) atomic_fetch_add(&stamp_errors, 1);
        tes_free(old); /* usually another thread's block */
      }
      p = tes_malloc(size);
      if (p == NULL) {
        atomic_fetch_add(&failed_calls, 1);
        continue;
      }
    }
    stamp(p, size, slot);
    unsigned char *displaced = atomic_exchange(&table[slot], p);
    if (displaced != NULL) {
      if (stamped_size(displaced, slot) == 0) atomic_fetch_add(&stamp_errors, 1);
      tes_free(displaced);
    }
  }
  atomic_fetch_sub(&workers_left, 1);
  return NULL;
}

static void *trimmer(void *arg) {
  (void)arg;
  for (unsigned n = 0; atomic_load(&workers_left) > 0; n++) {
    tes_collect((n & 7) == 0);
    api_sleep_ms(2);
  }
  return NULL;
}

static void *warm_up(void *arg) {
  tes_free(tes_malloc(200000));
  return arg;
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  if (!api_allocator_is_tessera()) return 77;
  /* This thread's heap, and the first other thread's (its heap struct's
   * memory stays mapped for later threads), before the baseline. */
  tes_free(tes_malloc(1));
  pthread_t warm;
  REQUIRE(pthread_create(&warm, NULL, warm_up, NULL) == 0, "pthread_create");
  pthread_join(warm, NULL);
  tes_collect(true);
  tes_stats_t before, after;
  tes_stats_get(&before);

  API_GROUP("large blocks freed by other threads");
  pthread_t threads[THREADS], trim;
  atomic_store(&workers_left, THREADS);
  for (uintptr_t i = 0; i < THREADS; i++) REQUIRE(pthread_create(&threads[i], NULL, worker, (void *)i) == 0, "pthread_create");
  REQUIRE(pthread_create(&trim, NULL, trimmer, NULL) == 0, "pthread_create");
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  pthread_join(trim, NULL);
  CHECK(atomic_load(&stamp_errors) == 0, "every block kept its stamps (%ld wrong)", atomic_load(&stamp_errors));
  CHECK(atomic_load(&failed_calls) == 0, "no malloc or realloc failed (%ld did)", atomic_load(&failed_calls));
  tes_stats_get(&after);
  CHECK(after.large_in_use.current > 0, "large blocks are live before the last frees (%" PRId64 " bytes)",
        after.large_in_use.current);
  for (unsigned slot = 0; slot < SLOTS; slot++) {
    unsigned char *p = atomic_exchange(&table[slot], NULL);
    if (p == NULL) continue;
    CHECK(stamped_size(p, slot) != 0, "slot %u kept its stamps", slot);
    tes_free(p);
  }
  tes_stats_get(&after);
  CHECK(after.large_in_use.current == 0, "the large in-use gauge is back to 0 (%" PRId64 ")", after.large_in_use.current);

  API_GROUP("committed after everything is given back");
  tes_collect(true);
  tes_stats_get(&after);
  /* The threads' heaps are gone (their pages abandoned, then collected):
   * what stays committed is what was before, give or take this thread's
   * own pages. */
  int64_t drift = after.committed.current - before.committed.current;
  CHECK(drift > -(int64_t)(1 << 20) && drift < (int64_t)(1 << 20),
        "committed back to where it was: %" PRId64 " bytes before, %" PRId64 " after", before.committed.current,
        after.committed.current);
  return api_finish("api_large_xfree");
}
