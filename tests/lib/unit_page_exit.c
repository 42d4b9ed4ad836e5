/* unit_page_exit.c — what thread exit and adoption do to a page's lists
 * (src/heap.c heap_detach, tes_heap_adopt_segment; src/page.c
 * tes_page_take_if_empty, tes_page_free_count): a page whose remote stack
 * cannot empty it leaves with the stack as it is (no walk of its blocks,
 * which sit in other threads' caches), one that its stack empties is
 * retired, the statistics stay exact across both, and the free-list count
 * that walks free and local_free in step agrees with a walk of free. */
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>

enum { KEPT = 1024, EMPTIED = 2048 };

static void *kept[40], *emptied[20];
static pthread_barrier_t allocated, freed;

static void *worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 40; i++) kept[i] = tes_malloc(KEPT);
  for (int i = 0; i < 20; i++) emptied[i] = tes_malloc(EMPTIED);
  for (int i = 0; i < 10; i++) tes_free(kept[i]); /* the owner's: local_free */
  for (int i = 0; i < 5; i++) tes_free(emptied[i]);
  pthread_barrier_wait(&allocated);
  pthread_barrier_wait(&freed); /* the main thread freed some of ours */
  return NULL;
}

static size_t walk(const tes_block_t *b) {
  size_t n = 0;
  for (; b != NULL; b = b->next) n++;
  return n;
}

int main(void) {
  /* The page lists are the subject: no bins (unit_bin.c), so the owner's
   * frees go to local_free. */
  REQUIRE(tes_option_set(TES_OPTION_BINS, 0) == 0, "TESSERA_BINS=0");
  /* So is the abandon at thread exit: the exited thread's heap is not
   * parked for a next new thread (parking: api_thread_reuse.c). */
  REQUIRE(tes_option_set(TES_OPTION_HEAP_PARK, 0) == 0, "TESSERA_HEAP_PARK=0");
  tes_free(tes_malloc(1));
  tes_stats_t s0, s1;
  tes_stats_get(&s0);

  pthread_barrier_init(&allocated, NULL, 2);
  pthread_barrier_init(&freed, NULL, 2);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
  pthread_barrier_wait(&allocated);
  tes_page_t *kp = tes_page_of(tes_segment_of(kept[10]), kept[10]);
  tes_page_t *ep = tes_page_of(tes_segment_of(emptied[5]), emptied[5]);
  REQUIRE(tes_page_of(tes_segment_of(kept[39]), kept[39]) == kp, "the kept blocks share a page");
  REQUIRE(tes_page_of(tes_segment_of(emptied[19]), emptied[19]) == ep, "the emptied blocks share a page");
  for (int i = 10; i < 20; i++) tes_free(kept[i]);  /* remote: 20 stay live */
  for (int i = 5; i < 20; i++) tes_free(emptied[i]); /* remote: the last ones */
  uintptr_t tf = atomic_load(&kp->xthread_free);
  CHECK(tes_tf_count(tf) == 10, "remote stack of the kept page holds %u, want 10", tes_tf_count(tf));
  pthread_barrier_wait(&freed);
  pthread_join(t, NULL);

  /* After the exit: the kept page is in the abandoned segment with its
   * stack untouched (its owner collected every page's stack before); the
   * emptied one is retired. */
  CHECK(kp->in_use, "the page with live blocks left use");
  CHECK(atomic_load(&kp->xthread_free) == tf, "thread exit changed the remote stack of a page it cannot empty (%#lx, was %#lx)",
        (unsigned long)atomic_load(&kp->xthread_free), (unsigned long)tf);
  CHECK(tes_page_live(kp) == 30, "kept page live %u, want 30 (20 + 10 on its stack)", tes_page_live(kp));
  CHECK(!ep->in_use, "the page its remote frees emptied was not retired at the exit");

  /* Adoption (tes_collect adopts abandoned segments) and the counts. */
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(s1.malloc_calls - s0.malloc_calls == 60, "malloc +%lu, want 60", (unsigned long)(s1.malloc_calls - s0.malloc_calls));
  CHECK(s1.free_calls - s0.free_calls == 40, "free +%lu, want 40", (unsigned long)(s1.free_calls - s0.free_calls));
  unsigned ck = tes_class_of(KEPT), ce = tes_class_of(EMPTIED);
  CHECK(s1.class_live_blocks[ck] - s0.class_live_blocks[ck] == 20, "live %ld of the kept class, want 20",
        (long)(s1.class_live_blocks[ck] - s0.class_live_blocks[ck]));
  CHECK(s1.class_live_blocks[ce] - s0.class_live_blocks[ce] == 0, "live %ld of the emptied class, want 0",
        (long)(s1.class_live_blocks[ce] - s0.class_live_blocks[ce]));
  for (int i = 20; i < 40; i++) tes_free(kept[i]);
  tes_stats_get(&s1);
  CHECK(s1.free_calls - s0.free_calls == 60 && s1.malloc_calls - s0.malloc_calls == 60,
        "after freeing the adopted blocks: malloc +%lu free +%lu, want 60 and 60",
        (unsigned long)(s1.malloc_calls - s0.malloc_calls), (unsigned long)(s1.free_calls - s0.free_calls));
  CHECK(s1.in_use.current == s0.in_use.current, "in use %ld, was %ld", (long)s1.in_use.current,
        (long)s0.in_use.current);

  /* The free count: free and local_free walked in step, in every mix. */
  tes_heap_t *heap = tes_heap_new();
  REQUIRE(heap != NULL, "tes_heap_new");
  static void *b[120];
  for (int i = 0; i < 120; i++) b[i] = tes_heap_malloc(heap, 512); /* 128 a page */
  tes_page_t *page = tes_page_of(tes_segment_of(b[0]), b[0]);
  REQUIRE(tes_page_of(tes_segment_of(b[119]), b[119]) == page, "one page");
  for (int i = 0; i < 120; i++) {
    if (i % 7 == 0 || i == 119) {
      size_t f = walk(page->free), l = walk(page->local_free);
      CHECK(tes_page_free_count(page) == f, "after %d frees: count %zu, free %zu, local_free %zu", i,
            tes_page_free_count(page), f, l);
    }
    if (i == 60) tes_page_collect(page); /* local_free becomes free */
    tes_free(b[i]);
  }
  tes_heap_delete(heap);
  return unit_finish("unit_page_exit");
}
