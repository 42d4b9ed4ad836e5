/* unit_merge26.c — the twenty-sixth session's merges checked against each
 * other (mrg26, docs/RELIABILITY.md).
 *
 * 1. The resident cache take (rss26, segment.c cache_take_resident): a page
 *    take that would fault takes a resident segment from the cache. It must
 *    leave a unit a large block or a packed host left (kind LARGE: its
 *    header is a large block's or a host's table, kept for the next large
 *    block), and a small or medium one it takes must come with its page
 *    descriptors cleared, whatever the old ones said (the d87dc28 kind of
 *    bug: old bytes read as pages in use).
 * 2. Linking a segment (start26, owned_set) walks only the pages whose
 *    free bit is clear: a full small segment (64 pages, the mask's edge) and
 *    a full medium one (8 pages), unlinked and linked again (as adoption
 *    links a segment), have every page in use in the thread's slice table.
 * 3. A thread past its exit (start26: tes_tls_exited, where a second static
 *    heap was): a free from a destructor that runs after the library's
 *    leaves the thread without a heap (counted in the orphan counters), a
 *    malloc there gets one (a late heap), and the flag stays. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"
#include "tessera.h"

#include <pthread.h>
#include <string.h>

#define UNIT_BASE(p) ((tes_segment_t *)((uintptr_t)(p) & ~(uintptr_t)TES_SEGMENT_MASK))
#define MAX_BLOCKS 20000
static void *blocks[MAX_BLOCKS];
static size_t block_count;

static void *take(size_t size) {
  REQUIRE(block_count < MAX_BLOCKS, "too many blocks");
  void *p = tes_malloc(size);
  REQUIRE(p != NULL, "malloc(%zu)", size);
  memset(p, 0x5A, size);
  return blocks[block_count++] = p;
}

/* A resident unit of `kind` in the cache, its header full of old bytes. */
static tes_segment_t *cache_resident_unit(tes_segment_kind_t kind) {
  tes_segment_t *unit = tes_segment_obtain(TES_SEGMENT_SIZE, TES_SEGMENT_SIZE);
  REQUIRE(unit != NULL, "a unit");
  size_t size = unit->size;
  memset(unit, 0xE5, 3 * tes_os_page_size()); /* old descriptors, a host's table, a block's bytes */
  unit->size = size;
  unit->kind = kind;
  unit->in_all_list = false;
  unit->all_next = unit->all_prev = NULL;
  unit->purged_bytes = 0;
  unit->dirty_end = size;
  unit->heap = NULL;
  tes_segment_free(unit);
  return unit;
}

static void check_resident_take(void) {
  /* A small segment of the heap's with free pages never handed out (a take
   * from it would fault): with none, a new segment would come from the
   * cache whatever unit it holds (tes_segment_alloc), which is no take. */
  tes_segment_t *own = UNIT_BASE(take(1024));
  REQUIRE(__builtin_popcountll(own->free_mask & ~own->dirty_mask) >= 40, "a fresh small segment");
  size_t before = tes_cache_count();
  tes_segment_t *large_unit = cache_resident_unit(TES_SEG_LARGE);
  REQUIRE(tes_cache_count() == before + 1, "the unit is in the cache");
  /* 1 KiB blocks: 16 pages of new small pages, each take would fault. */
  bool in_large = false;
  for (int i = 0; i < 16 * 64; i++) in_large |= UNIT_BASE(take(1024)) == large_unit;
  CHECK(!in_large, "small blocks were carved from a unit a large block left");
  CHECK(tes_cache_count() == before + 1, "the cache held %zu units, now %zu", before + 1, tes_cache_count());

  tes_segment_t *small_unit = cache_resident_unit(TES_SEG_MEDIUM);
  bool in_small = false;
  for (int i = 0; i < 16 * 64 && !in_small; i++) in_small = UNIT_BASE(take(1024)) == small_unit;
  CHECK(in_small, "a resident medium unit in the cache was not taken for small pages");
  if (in_small) {
    CHECK(small_unit->kind == TES_SEG_SMALL, "kind %d", (int)small_unit->kind);
    unsigned stale = 0;
    for (unsigned i = 1; i < small_unit->page_count; i++) {
      const tes_page_t *page = &small_unit->pages[i];
      bool handed_out = !(small_unit->free_mask & ((uint64_t)1 << i));
      bool set_up = small_unit->desc_ready & ((uint64_t)1 << i);
      /* Its dirty pages are set up (schedule_dirty_pages): on this heap's
       * purge list, not in use. The others read as zero until handed out. */
      if (!handed_out && (page->in_use || (set_up && page->index != i))) stale++;
      if (!handed_out && !set_up) {
        const uint8_t *bytes = (const uint8_t *)page;
        for (size_t b = 0; b < sizeof *page; b++)
          if (bytes[b] != 0) {
            stale++;
            break;
          }
      }
    }
    CHECK(stale == 0, "%u descriptors of pages never handed out still hold the old bytes", stale);
  }
}

/* Fill the segment of a block of `size` until no page of it is free, then
 * unlink and link it again: every page in use must be in the slice table. */
static void check_relink(size_t size, tes_segment_kind_t kind, unsigned want_pages) {
  tes_segment_t *seg = UNIT_BASE(take(size));
  REQUIRE(seg->kind == kind, "a block of %zu bytes is in a segment of kind %d", size, (int)seg->kind);
  REQUIRE(seg->page_count == want_pages, "page_count %u", seg->page_count);
  for (size_t n = 0; seg->free_mask != 0; n++) {
    REQUIRE(n < (size_t)(TES_SEGMENT_SIZE / size) * 2 + 64, "the segment never filled");
    take(size);
  }
  tes_heap_t *heap = tes_tls_heap;
  tes_segment_unlink(heap, seg);
  tes_segment_link(heap, seg);
  unsigned missed = 0, in_use = 0;
  for (unsigned i = 1; i < seg->page_count; i++) {
    if (!seg->pages[i].in_use) continue;
    in_use++;
    size_t slot;
    const uint8_t *start = (const uint8_t *)seg + ((size_t)i << seg->page_shift);
    if (!tes_slice_hit(heap->slices, start, &slot) || heap->slices->entry[slot].page != &seg->pages[i]) missed++;
  }
  CHECK(in_use == want_pages - 1, "%u pages in use of %u", in_use, want_pages - 1);
  CHECK(missed == 0, "%u of %u pages in use are not in the slice table after a relink", missed, in_use);
  printf("relink of a %u-page segment: %u pages in use, all in the slice table\n", want_pages, in_use);
}

static pthread_key_t later_key;
static struct {
  bool ran, exited_flag, static_after_free, heap_after_malloc, exited_after_malloc;
  uint64_t orphan_frees_grew;
} later;

static void later_destructor(void *block) {
  later.ran = true;
  later.exited_flag = tes_tls_exited;
  uint64_t orphan_before = tes_orphan_counters.remote_frees;
  tes_free(block);
  later.static_after_free = tes_tls_heap->is_static;
  later.orphan_frees_grew = tes_orphan_counters.remote_frees - orphan_before;
  void *again = tes_malloc(64);
  later.heap_after_malloc = again != NULL && !tes_tls_heap->is_static;
  later.exited_after_malloc = tes_tls_exited;
  tes_free(again);
}

static void *exiting_thread(void *arg) {
  (void)arg;
  void *block = tes_malloc(100);
  pthread_setspecific(later_key, block);
  return NULL;
}

static void check_after_exit(void) {
  REQUIRE(pthread_key_create(&later_key, later_destructor) == 0, "a key after the library's");
  pthread_t thread;
  REQUIRE(pthread_create(&thread, NULL, exiting_thread, NULL) == 0, "pthread_create");
  pthread_join(thread, NULL);
  REQUIRE(later.ran, "the destructor did not run");
  CHECK(later.exited_flag, "the library's destructor had not run first (or did not set tes_tls_exited)");
  CHECK(later.static_after_free, "a free after the thread's exit made it a heap");
  CHECK(later.orphan_frees_grew == 1, "the free after exit counted %llu orphan frees",
        (unsigned long long)later.orphan_frees_grew);
  CHECK(later.heap_after_malloc, "a malloc after the thread's exit got no heap");
  CHECK(later.exited_after_malloc, "the exited flag was cleared by the late heap");
  printf("after exit: a free stays heapless, a malloc gets a late heap\n");
}

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 3600000) == 0, "an hour's purge delay");
  tes_free(tes_malloc(16)); /* the thread's heap */
  tes_collect(true);        /* an empty cache */
  check_resident_take();
  check_relink(1024, TES_SEG_SMALL, 64);
  check_relink(64 * 1024, TES_SEG_MEDIUM, 8);
  check_after_exit();
  for (size_t i = 0; i < block_count; i++) tes_free(blocks[i]);
  return unit_finish("unit_merge26");
}
