/* unit_page.c — a page's three free lists and its accounting (src/page.c,
 * heap.c, free.c): malloc pops `free`, the owner's free pushes `local_free`
 * (used counts live blocks + the head pin), collection moves local_free back
 * and takes the remote xthread_free stack with its exact count; a page with
 * no free block moves to the full queue and comes back on the owner's first
 * free into it, or through the delayed list when another thread frees into
 * it; an empty page that is not the head is retired to its segment. */
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct job_s {
  void **blocks;
  size_t count;
} job_t;

static void *free_all(void *arg) {
  job_t *job = arg;
  for (size_t i = 0; i < job->count; i++) tes_free(job->blocks[i]);
  return NULL;
}

static void remote_free(void **blocks, size_t count) {
  pthread_t t;
  job_t job = {blocks, count};
  REQUIRE(pthread_create(&t, NULL, free_all, &job) == 0, "pthread_create");
  pthread_join(t, NULL);
}

int main(void) {
  /* The page's own lists are the subject here: no bins, so every owner free
   * goes to the page (bins: unit_bin.c). A heap takes the setting when it
   * is set up. */
  REQUIRE(tes_option_set(TES_OPTION_BINS, 0) == 0, "TESSERA_BINS=0");
  tes_heap_t *heap = tes_heap_new();
  REQUIRE(heap != NULL, "tes_heap_new");
  enum { SIZE = 1024 };
  size_t per_page = ((size_t)1 << TES_SMALL_PAGE_SHIFT) / SIZE; /* 64 */

  /* Pop and push on one page. */
  void *a = tes_heap_malloc(heap, SIZE);
  tes_page_t *page = tes_page_of(tes_segment_of(a), a);
  CHECK(page->reserved == per_page, "reserved %u, want %zu", page->reserved, per_page);
  CHECK(page->pinned && page->used == 2, "head page: pinned %d used %u, want pinned with used 2", page->pinned,
        page->used);
  CHECK(tes_page_live(page) == 1, "live %u", tes_page_live(page));
  CHECK(page->capacity > 0 && page->capacity <= page->reserved, "capacity %u", page->capacity);
  tes_free(a);
  CHECK(page->local_free == a && page->used == 1, "owner free: local_free %p used %u", (void *)page->local_free,
        page->used);
  void *b = tes_heap_malloc(heap, SIZE);
  CHECK(b != a || page->free == NULL, "free list popped before local_free was collected");
  tes_free(b);

  /* Fill the page completely: it leaves the class queue for the full queue. */
  void *blocks[64];
  for (size_t i = 0; i < per_page; i++) {
    blocks[i] = tes_heap_malloc(heap, SIZE);
    REQUIRE(tes_page_of(tes_segment_of(blocks[i]), blocks[i]) == page, "block %zu from another page", i);
  }
  void *next = tes_heap_malloc(heap, SIZE); /* the slow path finds page full */
  CHECK(page->in_full && !page->pinned && page->used == 1, "full page: in_full %d pinned %d used %u", page->in_full,
        page->pinned, page->used);
  CHECK(tes_page_live(page) == page->reserved, "full page live %u", tes_page_live(page));
  CHECK(heap->full.first == page, "page is not in the full queue");
  CHECK((atomic_load(&page->xthread_free) & TES_TF_MASK) == TES_TF_USE_DELAYED, "full page not in delayed mode");
  tes_page_t *second = tes_page_of(tes_segment_of(next), next);
  CHECK(second != page && heap->queues[page->class_index].first == second, "new head page expected");

  /* The owner frees into the full page: it comes back to its queue. */
  tes_free(blocks[0]);
  CHECK(!page->in_full && tes_page_live(page) == page->reserved - 1, "after owner free: in_full %d live %u",
        page->in_full, tes_page_live(page));
  blocks[0] = tes_heap_malloc(heap, SIZE); /* from the head page */

  /* Fill it again, then another thread frees into it: delayed list. */
  static void *extra[512];
  size_t extras = 0;
  while (tes_page_live(page) < page->reserved && extras < 256) extra[extras++] = tes_heap_malloc(heap, SIZE);
  for (size_t i = 0; i < 2 * per_page && !page->in_full; i++) extra[extras++] = tes_heap_malloc(heap, SIZE);
  if (page->in_full) {
    remote_free(blocks + 1, 4);
    CHECK(atomic_load(&heap->delayed_free) != NULL, "remote free into a full page did not use the delayed list");
    uintptr_t tf = atomic_load(&page->xthread_free);
    CHECK((tf & TES_TF_MASK) == TES_TF_NORMAL && (tf & ~TES_TF_MASK) != 0,
          "after the delayed hand-off the page takes remote frees itself (tf %#lx)", (unsigned long)tf);
    tes_heap_collect(heap, false); /* owner: process delayed, collect */
    CHECK(!page->in_full, "page still full after the delayed hand-off");
    CHECK(tes_page_live(page) == page->reserved - 4, "live %u after 4 remote frees, want %u", tes_page_live(page),
          page->reserved - 4);
    CHECK(page->remote_collected >= 3, "remote frees collected %lu", (unsigned long)page->remote_collected);
  } else {
    CHECK(0, "could not fill the page again");
  }

  /* Remote frees on a normal page: collected with their exact count. */
  uint32_t live_before = tes_page_live(page);
  uint64_t collected_before = page->remote_collected;
  remote_free(blocks + 5, 10);
  CHECK(tes_page_live(page) == live_before, "remote frees changed used before collection");
  size_t got = tes_page_collect(page);
  CHECK(got == 10 && tes_page_live(page) == live_before - 10, "collected %zu, live %u", got, tes_page_live(page));
  CHECK(page->remote_collected == collected_before + 10, "remote_collected %lu",
        (unsigned long)page->remote_collected);

  /* The remote stack carries its length in the word; collection splices it
   * whole onto whichever list is empty, and walks it only when neither is. */
  {
    enum { SPLICE = 2048 };
    void *s[32];
    size_t n = 0;
    s[n++] = tes_heap_malloc(heap, SPLICE);
    tes_page_t *sp = tes_page_of(tes_segment_of(s[0]), s[0]);
    /* At least 12 blocks out, and some carved ones left on `free`. */
    while ((n < 12 || sp->free == NULL) && n < 28) {
      s[n] = tes_heap_malloc(heap, SPLICE);
      REQUIRE(tes_page_of(tes_segment_of(s[n]), s[n]) == sp, "splice block %zu from another page", n);
      n++;
    }
    REQUIRE(sp->free != NULL && sp->local_free == NULL, "splice page: want free blocks and an empty local_free");
    uint32_t live0 = tes_page_live(sp);

    /* 1: local_free empty: the stack becomes local_free as it is. */
    remote_free(s + 0, 3);
    uintptr_t tf = atomic_load(&sp->xthread_free);
    CHECK(tes_tf_count(tf) == 3 && tes_tf_list(tf) == s[2], "stack of 3: count %u head %p, want 3 and %p",
          tes_tf_count(tf), (void *)tes_tf_list(tf), s[2]);
    tes_block_t *free_before = sp->free;
    CHECK(tes_page_collect(sp) == 3, "case 1: collected count");
    CHECK(sp->local_free == s[2] && sp->free == free_before && tes_page_live(sp) == live0 - 3,
          "case 1: local_free %p free %p live %u", (void *)sp->local_free, (void *)sp->free, tes_page_live(sp));
    CHECK(atomic_load(&sp->xthread_free) == (tf & TES_TF_MASK), "case 1: stack not emptied");

    /* 2: both lists hold blocks: the stack is walked onto local_free. */
    tes_free(s[3]);
    tes_free(s[4]);
    remote_free(s + 5, 3);
    CHECK(tes_page_collect(sp) == 3, "case 2: collected count");
    size_t local_len = 0;
    for (tes_block_t *b = sp->local_free; b != NULL && local_len < 64; b = tes_block_next(sp, b)) local_len++;
    CHECK(local_len == 8, "case 2: local_free holds %zu blocks, want 3 + 2 + 3", local_len);
    CHECK(tes_page_live(sp) == live0 - 8, "case 2: live %u, want %u", tes_page_live(sp), live0 - 8);

    /* 3: free is empty: local_free moves to free and the stack takes its place. */
    void *drained[32];
    size_t d = 0;
    while (sp->free != NULL && d < 32) drained[d++] = tes_heap_malloc(heap, SPLICE);
    REQUIRE(sp->free == NULL, "could not drain the splice page's free list");
    uint64_t installed = sp->installed;
    remote_free(s + 8, 2);
    CHECK(tes_page_collect(sp) == 2, "case 3: collected count");
    size_t free_len = 0;
    for (tes_block_t *b = sp->free; b != NULL && free_len < 64; b = tes_block_next(sp, b)) free_len++;
    CHECK(free_len == 8 && sp->local_free == s[9], "case 3: free holds %zu (want 8), local_free %p (want %p)",
          free_len, (void *)sp->local_free, s[9]);
    CHECK(sp->installed == installed + 8, "case 3: installed grew by %lu, want 8",
          (unsigned long)(sp->installed - installed));

    /* Every freed block comes back exactly once. */
    void *again[10];
    for (size_t i = 0; i < 10; i++) {
      again[i] = tes_heap_malloc(heap, SPLICE);
      CHECK(tes_page_of(tes_segment_of(again[i]), again[i]) == sp, "block %zu of 10 came from another page", i);
      for (size_t j = 0; j < i; j++) CHECK(again[j] != again[i], "block %p handed out twice", again[i]);
    }
    for (size_t i = 0; i < 10; i++) tes_free(again[i]);
    for (size_t i = 0; i < d; i++) tes_free(drained[i]);
    for (size_t i = 10; i < n; i++) tes_free(s[i]);
  }

  /* Free everything: a non-head page that empties is retired to its segment. */
  for (size_t i = 15; i < per_page; i++) tes_free(blocks[i]);
  for (size_t i = 0; i < extras; i++) tes_free(extra[i]);
  tes_free(blocks[0]);
  tes_free(next);
  tes_heap_collect(heap, true);
  CHECK(!page->in_use, "empty page still in use after collect");
  CHECK(heap->queues[page->class_index].first == NULL, "class queue not empty after collect");

  /* Lazy extension: a fresh page carves half of TES_EXTEND_BYTES first,
   * then TES_EXTEND_BYTES at a time. (tes_collect(true) unmaps the cached
   * segments: the next is fresh.) */
  tes_collect(true);
  void *x = tes_heap_malloc(heap, 16);
  tes_page_t *p16 = tes_page_of(tes_segment_of(x), x);
  CHECK(p16->capacity == TES_EXTEND_BYTES / 2 / 16, "fresh 16-byte page carved %u blocks, want %zu", p16->capacity,
        TES_EXTEND_BYTES / 2 / 16);
  void *more[TES_EXTEND_BYTES / 2 / 16];
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) more[i] = tes_heap_malloc(heap, 16);
  CHECK(p16->capacity == (TES_EXTEND_BYTES / 2 + TES_EXTEND_BYTES) / 16, "second extension: %u blocks carved, want %zu",
        p16->capacity, (TES_EXTEND_BYTES / 2 + TES_EXTEND_BYTES) / 16);
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) tes_free(more[i]);
  CHECK(p16->free_is_zero, "blocks carved from fresh memory are not known zero");
  tes_free(x);
  tes_heap_destroy(heap);

  /* Blocks of an OS page or more are carved one at a time (default build):
   * carving four wrote a link into each of their first OS pages, faulting
   * in memory for blocks never handed out. A fresh heap on a freshly mapped
   * segment (the cache unmapped) takes one 64 KiB block without writing it:
   * nothing of its page beyond that block is resident. */
  size_t os_page = (size_t)sysconf(_SC_PAGESIZE);
  if (!TES_SECURE && os_page <= 65536) {
    tes_collect(true);
    tes_heap_t *medium = tes_heap_new();
    REQUIRE(medium != NULL, "tes_heap_new");
    uint8_t *big = tes_heap_malloc(medium, 65536);
    REQUIRE(big != NULL, "65536-byte block");
    tes_page_t *pm = tes_page_of(tes_segment_of(big), big);
    CHECK(pm->capacity == 1, "fresh page of 64 KiB blocks carved %u blocks, want 1", pm->capacity);
    size_t page_bytes = (size_t)1 << tes_segment_of(big)->page_shift;
    uint8_t *rest = pm->area + 65536;
    size_t rest_pages = (page_bytes - 65536) / os_page;
    unsigned char vec[(((size_t)1 << TES_MEDIUM_PAGE_SHIFT) - 65536) / 4096];
    REQUIRE(rest_pages <= sizeof vec && mincore(rest, rest_pages * os_page, vec) == 0, "mincore");
    size_t resident = 0;
    for (size_t i = 0; i < rest_pages; i++) resident += vec[i] & 1;
    CHECK(resident == 0, "%zu OS pages resident beyond the one block taken", resident);
    uint8_t *big2 = tes_heap_malloc(medium, 65536);
    CHECK(big2 == big + 65536 && pm->capacity == 2, "second block: capacity %u", pm->capacity);
    tes_free(big2);
    tes_free(big);
    tes_heap_destroy(medium);
  }
  return unit_finish("unit_page");
}
