/* unit_slowpath_heads.c — the malloc slow path's bookkeeping (src/heap.c:
 * find_page, page_to_full, class_head_changed) checked after every
 * allocation of every class: each direct-table entry points to its class
 * queue's head (or tes_page_empty), the head is pinned, every page of the
 * full queue is marked in_full and has no free block; aligned allocations
 * (tes_heap_malloc_aligned) and first-class heaps keep the same invariants;
 * and pages that went full come back when another thread frees their
 * blocks (reused: no new page when the same count is allocated again).
 * The fourteenth session's review of the slow-path changes (unrolled
 * direct stores, heads unlinked as heads, collect only when pending). */
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <string.h>

static void *free_all(void *arg) {
  void **blocks = arg;
  for (size_t i = 0; blocks[i] != NULL; i++) tes_free(blocks[i]);
  return NULL;
}

static void remote_free(void **blocks) {
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, free_all, blocks) == 0, "pthread_create");
  pthread_join(t, NULL);
}

static unsigned checks;

static void check_heap(const tes_heap_t *heap, const char *what, unsigned c) {
  checks++;
  for (size_t i = 0; i < TES_DIRECT_COUNT; i++) {
    const tes_page_t *head = heap->queues[TES_DIRECT_CLASS_EXPR(i)].first;
    const tes_page_t *want = head != NULL ? head : &tes_page_empty;
    if (heap->direct[i] != want) {
      CHECK(false, "%s class %u: direct[%zu] is %p, the head of class %u is %p", what, c, i, (void *)heap->direct[i],
            TES_DIRECT_CLASS_EXPR(i), (void *)head);
      return;
    }
  }
  for (unsigned k = 0; k < TES_CLASS_COUNT; k++) {
    const tes_page_t *head = heap->queues[k].first;
    if (head != NULL && (!head->pinned || head->in_full)) {
      CHECK(false, "%s class %u: head of class %u pinned %d in_full %d", what, c, k, head->pinned, head->in_full);
      return;
    }
  }
  for (const tes_page_t *p = heap->full.first; p != NULL; p = p->next) {
    if (!p->in_full || p->pinned || p->free != NULL) {
      CHECK(false, "%s class %u: a full-queue page in_full %d pinned %d free %p", what, c, p->in_full, p->pinned,
            (void *)p->free);
      return;
    }
  }
}

/* Pages of the blocks (distinct block-area starts). */
static size_t page_count(void **blocks, size_t n) {
  size_t pages = 0;
  static const void *seen[4096];
  for (size_t i = 0; i < n; i++) {
    tes_segment_t *seg = tes_segment_of(blocks[i]);
    const void *area = tes_page_of(seg, blocks[i])->area;
    size_t j = 0;
    while (j < pages && seen[j] != area) j++;
    if (j == pages && pages < 4096) seen[pages++] = area;
  }
  return pages;
}

/* Three pages' worth and one more of class c from heap (aligned to the
 * largest power of two dividing the block size when aligned), invariants
 * after each; then all freed by another thread and as many allocated
 * again: the same pages serve them. */
static void exercise_class(tes_heap_t *heap, unsigned c, bool aligned, const char *what) {
  size_t size = tes_class_size(c);
  size_t page_bytes = size <= TES_SMALL_BLOCK_MAX ? (size_t)1 << TES_SMALL_PAGE_SHIFT : (size_t)1 << TES_MEDIUM_PAGE_SHIFT;
  size_t n = 3 * (page_bytes / size) + 1;
  size_t alignment = size & -size;
  if (alignment > 4096) alignment = 4096;
  void **blocks = calloc(n + 1, sizeof *blocks); /* libc's: the test's own bookkeeping */
  REQUIRE(blocks != NULL, "calloc");
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < n; i++) {
      blocks[i] = aligned ? tes_heap_malloc_aligned(heap, size, alignment, false) : tes_heap_malloc(heap, size);
      REQUIRE(blocks[i] != NULL, "%s class %u: allocation %zu", what, c, i);
      if (aligned) CHECK(((uintptr_t)blocks[i] & (alignment - 1)) == 0, "%s: %p not aligned to %zu", what, blocks[i], alignment);
      CHECK(tes_usable_size(blocks[i]) >= size, "%s class %u: usable %zu", what, c, tes_usable_size(blocks[i]));
      memset(blocks[i], 0x5a, size);
      check_heap(heap, what, c);
    }
    size_t pages = page_count(blocks, n);
    remote_free(blocks);
    for (size_t i = 0; i < n; i++) {
      blocks[i] = aligned ? tes_heap_malloc_aligned(heap, size, alignment, false) : tes_heap_malloc(heap, size);
      REQUIRE(blocks[i] != NULL, "%s class %u: allocation %zu again", what, c, i);
      check_heap(heap, what, c);
    }
    size_t again = page_count(blocks, n);
    CHECK(again <= pages, "%s class %u: %zu pages, %zu after the remote frees (full pages did not come back)", what, c,
          pages, again);
    for (size_t i = 0; i < n; i++) tes_free(blocks[i]);
    check_heap(heap, what, c);
  }
  free(blocks);
}

int main(void) {
  /* Owner frees go to the pages, not to bins: the heads move. */
  REQUIRE(tes_option_set(TES_OPTION_BINS, 0) == 0, "TESSERA_BINS=0");
  tes_free(tes_malloc(1)); /* the thread's heap */
  tes_heap_t *own = tes_tls_heap;
  tes_heap_t *first_class = tes_heap_new();
  REQUIRE(first_class != NULL, "tes_heap_new");
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    exercise_class(own, c, false, "thread heap");
    exercise_class(own, c, true, "thread heap aligned");
    exercise_class(first_class, c, false, "first-class heap");
  }
  check_heap(own, "end", 0);
  check_heap(first_class, "end", 0);
  tes_heap_destroy(first_class);
  printf("%u checks\n", checks);
  return unit_finish("unit_slowpath_heads");
}
