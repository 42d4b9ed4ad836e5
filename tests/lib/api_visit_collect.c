/* api_visit_collect.c — tes_collect called by a tes_heap_visit visitor.
 * The walk of every heap holds the segments lock, which the collect takes:
 * the program aborted with "allocator re-entered ... (malloc or free in a
 * signal handler ...?)". The walk of one heap went on over pages the
 * collect retired under it. Now the collect waits for the walk's end (the
 * outermost one, when a visitor walks its own heap again; the walk of every
 * heap cannot be nested, it holds the lock) and runs then: the walk sees
 * every live block, and the memory another thread freed is given back. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <stdint.h>

#define BLOCKS 100000
#define SIZE 256
#define KEPT 1000 /* blocks the freeing thread leaves: the first ones */

static void *blocks[BLOCKS];

static void *freer(void *arg) {
  (void)arg;
  for (int i = KEPT; i < BLOCKS; i++) tes_free(blocks[i]);
  return NULL;
}

typedef struct walk_s {
  const tes_heap_t *heap; /* the heap walked (NULL: every heap) */
  size_t visited;         /* blocks of this test's heap seen */
  int collects;           /* tes_collect calls left to make (the first visits) */
  int64_t rss_at_end;     /* after a collect, then a nested walk's end: the collect must still wait */
  bool nested;            /* the first visit walks again */
} walk_t;

static bool count_only(const tes_block_info_t *block, void *arg) {
  (void)block, (void)arg;
  return true;
}

static bool visit(const tes_block_info_t *block, void *arg) {
  walk_t *w = arg;
  if (block->size_class == UINT32_MAX || block->usable_size < SIZE || block->usable_size > 2 * SIZE) return true;
  w->visited++;
  if (w->collects > 0) {
    w->collects--;
    tes_collect(true);
    if (w->nested) {
      w->nested = false;
      tes_heap_visit(w->heap, count_only, NULL);
      w->rss_at_end = api_rss_bytes();
    }
  }
  return true;
}

/* heap: NULL for the thread's default heap (walk_all must be true: no call
 * names it). */
static void run(tes_heap_t *heap, bool walk_all, bool nested) {
  tes_free(tes_malloc(1));
  tes_collect(true);
  int64_t start = api_rss_bytes();
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = heap != NULL ? tes_heap_malloc(heap, SIZE) : tes_malloc(SIZE);
    REQUIRE(blocks[i] != NULL, "malloc");
    memset(blocks[i], 0x5A, SIZE);
  }
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, freer, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  int64_t full = api_rss_bytes() - start;
  walk_t w = {walk_all ? NULL : heap, 0, 3, 0, nested};
  tes_heap_visit(w.heap, visit, &w);
  int64_t after = api_rss_bytes() - start;
  /* Walking every heap sees other blocks of this size too (the harness's,
   * libc's own): at least ours. */
  CHECK(walk_all ? w.visited >= KEPT : w.visited == KEPT, "%zu blocks visited, %d live", w.visited, KEPT);
  CHECK(w.collects == 0, "the visitor ran %d times fewer than asked", w.collects);
  if (nested)
    CHECK(w.rss_at_end - start > full / 2, "the collect ran before the outer walk's end (%lld KiB of %lld left)",
          (long long)((w.rss_at_end - start) >> 10), (long long)(full >> 10));
  CHECK(after < (int64_t)6 << 20, "%lld KiB resident above the start after the walk (%lld KiB before it)",
        (long long)(after >> 10), (long long)(full >> 10));
  for (int i = 0; i < KEPT; i++) {
    const unsigned char *b = blocks[i];
    CHECK(b[0] == 0x5A && b[SIZE - 1] == 0x5A, "live block %d kept its contents", i);
    tes_free(blocks[i]);
  }
}

int main(void) {
  API_GROUP("the walk of every heap, the default heap's blocks");
  run(NULL, true, false);
  tes_heap_t *h = tes_heap_new();
  REQUIRE(h != NULL, "tes_heap_new");
  API_GROUP("the walk of every heap, a first-class heap's blocks");
  run(h, true, false);
  API_GROUP("the walk of a first-class heap");
  run(h, false, false);
  API_GROUP("the walk of a first-class heap, a visitor walking again");
  run(h, false, true);
  tes_heap_destroy(h);
  return api_finish("api_visit_collect");
}
