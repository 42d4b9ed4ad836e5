/* api_kept_destroy_race.c — a thread destroys its own first-class heap, whose
 * emptied pages the hardened build keeps (heap.c, "kept empty pages"),
 * while another thread calls tes_collect(true), which gives kept pages'
 * memory back in place under the heap's purge lock (kept_purge_locked):
 * it empties their lists, lowers their `installed` count, sets their
 * capacity to 0 and purges them. tes_heap_free_all folded the kept pages'
 * statistics (a walk of their free lists, their counts) before it took
 * that lock: a data race, which ThreadSanitizer reports
 * (sanitize.lib_kept_destroy_race, the hardened library through tes_*
 * calls), and a walk of a list whose memory another thread was purging.
 * In the main build (lib.api_kept_destroy_race.secure and .default) the
 * per-class statistics must come out exact: every malloc of the rounds
 * counted once, no block left live, bytes in use back at the start. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define ROUNDS 150
/* Collections the other thread must have made while the rounds ran. */
#define MIN_OVERLAP 20
#define CLASSES 3
/* Three pages' worth and more of each class, so that pages other than the
 * class's head (which stays pinned) empty and are kept. */
static const size_t sizes[CLASSES] = {48, 400, 1000};
static const int counts[CLASSES] = {3000, 500, 200};

static atomic_bool stop;
static atomic_int trims;

static void *trimmer(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    tes_collect(true);
    atomic_fetch_add(&trims, 1);
  }
  return NULL;
}

/* The class index of a block of `size` (the one whose live count a malloc
 * of it raises). */
static int class_of(size_t size) {
  tes_stats_t a, b;
  tes_stats_get(&a);
  void *p = tes_malloc(size);
  REQUIRE(p != NULL, "tes_malloc");
  tes_stats_get(&b);
  int found = -1;
  for (uint32_t c = 0; c < b.class_count; c++)
    if (b.class_live_blocks[c] == a.class_live_blocks[c] + 1) found = (int)c;
  tes_free(p);
  REQUIRE(found >= 0, "no class counted a malloc of %zu bytes", size);
  return found;
}

int main(void) {
  API_GROUP("a thread destroys its heap while another collects");
  int cls[CLASSES];
  for (int k = 0; k < CLASSES; k++) cls[k] = class_of(sizes[k]);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, trimmer, NULL) == 0, "pthread_create");
  /* The rounds take some 60 ms: on a loaded machine the collecting thread
   * could be scheduled only after they ended, and nothing would race (the
   * check that it ran could fail so). Start when it runs, and
   * go on past ROUNDS until it has collected during the rounds too. */
  while (atomic_load(&trims) == 0) sched_yield();
  tes_collect(true);
  tes_stats_t s0, s1;
  tes_stats_get(&s0);
  static unsigned char *blocks[3000];
  uint64_t expected[CLASSES] = {0};
  int wrong = 0;
  int trims_at_start = atomic_load(&trims);
  for (int r = 0; r < ROUNDS || (atomic_load(&trims) - trims_at_start < MIN_OVERLAP && r < 100 * ROUNDS); r++) {
    tes_heap_t *h = tes_heap_new();
    REQUIRE(h != NULL, "tes_heap_new");
    for (int k = 0; k < CLASSES; k++) {
      /* All freed (the pages behind the head are kept), then half taken
       * again (kept pages come back with their blocks on `free`) and freed
       * again: kept pages with blocks on their lists for the fold to walk. */
      for (int pass = 0; pass < 2; pass++) {
        int n = pass == 0 ? counts[k] : counts[k] / 2;
        for (int i = 0; i < n; i++) {
          blocks[i] = tes_heap_malloc(h, sizes[k]);
          REQUIRE(blocks[i] != NULL, "tes_heap_malloc");
          memset(blocks[i], (r + i) & 0xff, sizes[k]);
        }
        expected[k] += (uint64_t)n;
        for (int i = 0; i < n; i++) {
          wrong += blocks[i][sizes[k] - 1] != (unsigned char)((r + i) & 0xff);
          tes_free(blocks[i]);
        }
      }
    }
    tes_heap_destroy(h);
  }
  atomic_store(&stop, true);
  pthread_join(t, NULL);
  CHECK(wrong == 0, "%d blocks changed under the program", wrong);
  CHECK(atomic_load(&trims) - trims_at_start >= MIN_OVERLAP, "the collecting thread ran %d times during the rounds",
        atomic_load(&trims) - trims_at_start);

  API_GROUP("statistics exact after the destroyed heaps");
  tes_collect(true);
  tes_stats_get(&s1);
  for (int k = 0; k < CLASSES; k++) {
    int c = cls[k];
    CHECK(s1.class_malloc_calls[c] - s0.class_malloc_calls[c] == expected[k],
          "class %d (%zu B): %llu mallocs counted, %llu made", c, sizes[k],
          (unsigned long long)(s1.class_malloc_calls[c] - s0.class_malloc_calls[c]),
          (unsigned long long)expected[k]);
    CHECK(s1.class_live_blocks[c] == s0.class_live_blocks[c], "class %d (%zu B): %lld live before, %lld after", c,
          sizes[k], (long long)s0.class_live_blocks[c], (long long)s1.class_live_blocks[c]);
  }
  CHECK(s1.in_use.current == s0.in_use.current, "in use %lld before, %lld after", (long long)s0.in_use.current,
        (long long)s1.in_use.current);
  return api_finish("api_kept_destroy_race");
}
