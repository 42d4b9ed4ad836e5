/* unit_stats.c — the derived counters stay exact across the events that
 * fold page counters into heap counters (src/stats.c, heap.c): a page that
 * empties and is retired, a thread that exits and whose segments another
 * thread adopts, and a first-class heap that is deleted. */
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>

static tes_stats_t s0, s1;
#define DELTA(f) ((int64_t)(s1.f - s0.f))

static void *leave_blocks(void *arg) {
  void **out = arg;
  for (int i = 0; i < 300; i++) out[i] = tes_malloc(96);
  for (int i = 300; i < 400; i++) tes_free(tes_malloc(96));
  return NULL;
}

int main(void) {
  tes_free(tes_malloc(1));
  int c96 = (int)tes_class_of(96);

  /* Retire: 5,000 blocks over several pages, all freed (pages retire). */
  static void *b[5000];
  tes_stats_get(&s0);
  for (int i = 0; i < 5000; i++) b[i] = tes_malloc(96);
  for (int i = 0; i < 5000; i++) tes_free(b[i]);
  tes_stats_get(&s1);
  CHECK(DELTA(malloc_calls) == 5000 && DELTA(free_calls) == 5000, "malloc +%ld free +%ld",
        (long)DELTA(malloc_calls), (long)DELTA(free_calls));
  CHECK(DELTA(class_malloc_calls[c96]) == 5000, "class calls +%ld", (long)DELTA(class_malloc_calls[c96]));
  CHECK(DELTA(class_live_blocks[c96]) == 0 && DELTA(in_use.current) == 0, "live +%ld in_use +%ld",
        (long)DELTA(class_live_blocks[c96]), (long)DELTA(in_use.current));
  CHECK(DELTA(fast_path_hits) + DELTA(fast_path_misses) == 5000, "hits+misses +%ld",
        (long)(DELTA(fast_path_hits) + DELTA(fast_path_misses)));

  /* Exit and adoption: counts survive the hand-over. */
  static void *left[300];
  tes_stats_get(&s0);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, leave_blocks, left) == 0, "pthread_create");
  pthread_join(t, NULL);
  tes_collect(true); /* adopts the exited thread's segments */
  tes_stats_get(&s1);
  CHECK(DELTA(class_malloc_calls[c96]) == 400, "class calls +%ld after exit+adopt, want 400",
        (long)DELTA(class_malloc_calls[c96]));
  CHECK(DELTA(class_live_blocks[c96]) == 300, "live +%ld, want 300", (long)DELTA(class_live_blocks[c96]));
  CHECK(DELTA(free_calls) == 100, "free +%ld, want 100", (long)DELTA(free_calls));
  tes_stats_get(&s0);
  for (int i = 0; i < 300; i++) tes_free(left[i]);
  tes_stats_get(&s1);
  CHECK(DELTA(free_calls) == 300 && DELTA(class_live_blocks[c96]) == -300, "free +%ld live %+ld after freeing adopted",
        (long)DELTA(free_calls), (long)DELTA(class_live_blocks[c96]));
  CHECK(DELTA(cross_thread_frees) == 0, "adopted blocks freed by their new owner counted as cross-thread");

  /* Delete: a heap's blocks move to this thread's heap, counts intact. */
  tes_stats_get(&s0);
  tes_heap_t *heap = tes_heap_new();
  for (int i = 0; i < 1000; i++) b[i] = tes_heap_malloc(heap, 96);
  tes_heap_delete(heap);
  tes_stats_get(&s1);
  CHECK(DELTA(class_live_blocks[c96]) == 1000 && DELTA(malloc_calls) == 1000, "after delete: live +%ld malloc +%ld",
        (long)DELTA(class_live_blocks[c96]), (long)DELTA(malloc_calls));
  for (int i = 0; i < 1000; i++) tes_free(b[i]);
  tes_stats_get(&s1);
  CHECK(DELTA(class_live_blocks[c96]) == 0 && DELTA(free_calls) == 1000, "after freeing: live %+ld free +%ld",
        (long)DELTA(class_live_blocks[c96]), (long)DELTA(free_calls));
  return unit_finish("unit_stats");
}
