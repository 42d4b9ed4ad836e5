/* api_visit_delete.c — a first-class heap deleted or destroyed while its
 * thread walks it with tes_heap_visit. Before, the walk went on over the
 * heap as it went:
 *  - destroyed by another thread, and the visitor calling tes_heap_new (or
 *    a malloc slow path), which processed that destroy: the heap's
 *    segments were freed under the walk (SIGSEGV with the segment cache
 *    off, which unmaps them at once);
 *  - destroyed by the visitor itself: the same;
 *  - deleted by the visitor itself: its pages moved to the default heap
 *    under the walk, which stopped seeing them (107 blocks of 10,000);
 *  - destroyed by a visitor of every heap: aborted, the walk's lock
 *    re-entered.
 * Now a delete or destroy a visitor asks for, or that its calls would
 * process, waits for the outermost walk's end (as tes_collect does): the
 * walk sees every live block, and the heap is gone once it returns. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define BLOCKS 20000
#define LIVE (BLOCKS / 2)
#define AT 100 /* the visit at which the visitor acts */

static void *blocks[BLOCKS];
static tes_heap_t *heap;

enum { OTHER_DESTROYS, DESTROYS, DELETES, EVERY_HEAP_DESTROYS };

typedef struct walk_s {
  int how;
  size_t visited; /* blocks of `heap` seen */
  atomic_int *marked;
} walk_t;

static void *destroyer(void *arg) {
  atomic_int *marked = arg;
  while (atomic_load(marked) == 0) api_sleep_ms(1);
  tes_heap_destroy(heap); /* only marks it: this thread does not own it */
  atomic_store(marked, 2);
  return NULL;
}

static bool visit(const tes_block_info_t *block, void *arg) {
  walk_t *w = arg;
  if (block->heap != heap) return true;
  if (++w->visited != AT) return true;
  switch (w->how) {
    case OTHER_DESTROYS: {
      atomic_store(w->marked, 1);
      while (atomic_load(w->marked) != 2) api_sleep_ms(1);
      tes_heap_t *other = tes_heap_new(); /* processes the heaps other threads deleted */
      tes_heap_destroy(other);
      break;
    }
    case DESTROYS:
    case EVERY_HEAP_DESTROYS: tes_heap_destroy(heap); break;
    default: tes_heap_delete(heap); break;
  }
  return true;
}

/* Live blocks the walk of every heap finds among the ones this test kept
 * (the odd ones): other threads' allocations (pthread's) stay out. */
static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return x < y ? -1 : x > y;
}
static void *kept[LIVE];

static bool count(const tes_block_info_t *block, void *arg) {
  if (bsearch(&block->address, kept, LIVE, sizeof kept[0], by_address) != NULL) ++*(size_t *)arg;
  return true;
}

static void one_case(const char *name, int how) {
  API_GROUP(name);
  heap = tes_heap_new();
  REQUIRE(heap != NULL, "tes_heap_new");
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = tes_heap_malloc(heap, 16 + (size_t)(i % 50) * 40);
    REQUIRE(blocks[i] != NULL, "tes_heap_malloc");
  }
  for (int i = 0; i < BLOCKS; i += 2) tes_free(blocks[i]);
  for (int i = 0; i < LIVE; i++) kept[i] = blocks[2 * i + 1];
  qsort(kept, LIVE, sizeof kept[0], by_address);
  atomic_int marked = 0;
  pthread_t t;
  if (how == OTHER_DESTROYS) REQUIRE(pthread_create(&t, NULL, destroyer, &marked) == 0, "pthread_create");
  walk_t w = {how, 0, &marked};
  tes_heap_visit(how == EVERY_HEAP_DESTROYS ? NULL : heap, visit, &w);
  if (how == OTHER_DESTROYS) pthread_join(t, NULL);
  CHECK(w.visited == LIVE, "the walk saw %zu of the heap's %d live blocks", w.visited, LIVE);
  /* Once the walk returned, the heap is gone: destroyed (its blocks with
   * it) or deleted (its blocks alive, in the default heap). */
  size_t after = 0;
  tes_heap_visit(NULL, count, &after);
  size_t expect = how == DELETES ? LIVE : 0;
  CHECK(after == expect, "%zu of the heap's blocks live after the walk, %zu expected", after, expect);
  if (how == DELETES)
    for (int i = 1; i < BLOCKS; i += 2) tes_free(blocks[i]);
}

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_SEGMENT_CACHE, 0) == 0, "segment cache off");
  one_case("destroyed by another thread, processed by a visitor's tes_heap_new", OTHER_DESTROYS);
  one_case("destroyed by its visitor", DESTROYS);
  one_case("deleted by its visitor", DELETES);
  one_case("destroyed by a visitor of every heap", EVERY_HEAP_DESTROYS);
  return api_finish("api_visit_delete");
}
