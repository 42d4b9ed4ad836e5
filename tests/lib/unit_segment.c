/* unit_segment.c — owner lookup from an address (src/segment.c, free.c):
 * blocks of every kind (small, medium, large, huge, huge-aligned) are found
 * by tes_segment_find and accepted by tes_owned_segment; pointers no
 * segment owns (stack, global, a foreign mmap, NULL, a non-canonical
 * address, a cached segment after free) are refused without being touched;
 * the per-thread slice table agrees with the segment map; four threads
 * registering and unregistering neighbouring 4 MiB units (whose two bits
 * share one byte of the map) never undo each other's entries. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <sys/mman.h>

static char global_buffer[4096];

/* Neighbouring units: four fake one-unit segments (a header with only its
 * size, in a mapping of our own), each toggled in the map by its own thread;
 * after every store the thread's own unit must read what it wrote. */
enum { NEIGHBOURS = 4, TOGGLES = 200000 };
static tes_segment_t *fake[NEIGHBOURS];
static _Atomic int neighbour_errors;

static void *toggle_unit(void *arg) {
  tes_segment_t *seg = fake[(uintptr_t)arg];
  for (int i = 0; i < TOGGLES; i++) {
    bool present = (i & 1) == 0;
    tes_segmap_set(seg, present);
    if (tes_segmap_get(seg) != (present ? 1u : 0u) || (tes_segment_find(seg) == seg) != present)
      atomic_fetch_add(&neighbour_errors, 1);
  }
  return NULL;
}

/* A heap struct goes back to a pool at its thread's exit and its slice
 * table is cleared for the next thread, in 4 KiB runs of tags (only those
 * written). The first thread fills tags in several runs (its 96 KiB blocks
 * span some 2,000 slices) and frees everything, leaving the empty tag
 * UINTPTR_MAX behind; the next thread, given the same struct, must see no
 * such tag but the one in slot 0. */
#define POOL_BLOCKS 1500
static tes_heap_t *pooled_heap;
static void *pool_fill_thread(void *arg) {
  (void)arg;
  static void *blocks[POOL_BLOCKS];
  for (int i = 0; i < POOL_BLOCKS; i++) blocks[i] = tes_malloc(96 * 1024);
  for (int i = 0; i < POOL_BLOCKS; i++) tes_free(blocks[i]);
  pooled_heap = tes_tls_heap;
  return NULL;
}
static size_t pool_stale_tags, pool_runs_written;
static bool pool_reused;
static void *pool_check_thread(void *arg) {
  (void)arg;
  void *p = tes_malloc(16);
  pool_reused = tes_tls_heap == pooled_heap;
  for (size_t i = 1; i < TES_SLICE_SLOTS; i++)
    if (tes_tls_slices->tag[i] == UINTPTR_MAX) pool_stale_tags++;
  tes_free(p);
  return NULL;
}
static void pooled_table_cleared(void) {
  /* The heap struct must go back to the pool at the exit, not wait parked
   * for the next thread (which then keeps its table: api_thread_reuse.c). */
  long park = tes_option_get(TES_OPTION_HEAP_PARK);
  REQUIRE(tes_option_set(TES_OPTION_HEAP_PARK, 0) == 0, "TESSERA_HEAP_PARK=0");
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, pool_fill_thread, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  pool_runs_written = __builtin_popcount(pooled_heap->slices->tag_runs_written);
  REQUIRE(pthread_create(&t, NULL, pool_check_thread, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  CHECK(pool_runs_written >= 3, "the first thread wrote %zu runs of tags, want several", pool_runs_written);
  CHECK(pool_reused, "the second thread did not get the pooled heap struct");
  CHECK(pool_stale_tags == 0, "%zu stale tags in a pooled heap's table", pool_stale_tags);
  tes_option_set(TES_OPTION_HEAP_PARK, park);
}

/* The free fast path reads the thread's slice table from its own TLS slot:
 * it must name the heap's table from the heap's first malloc on, and the
 * static all-miss table before. (Were it left at the static one, every
 * free would take the slow path: slower, never wrong, so check it here.) */
static _Atomic int tls_slices_errors;
static void *tls_slices_thread(void *arg) {
  (void)arg;
  if (tes_tls_slices != &tes_slices_none || tes_tls_heap != &tes_heap_empty) tls_slices_errors++;
  void *p = tes_malloc(32);
  if (tes_tls_heap == &tes_heap_empty || tes_tls_slices != tes_tls_heap->slices) tls_slices_errors++;
  size_t slot;
  if (!tes_slice_hit(tes_tls_slices, p, &slot)) tls_slices_errors++;
  tes_free(p);
  return NULL;
}

/* Heap structs (each followed by its slice table) are carved one after the
 * other from a chunk: each must start on a cache line of its own, so that
 * its hot fields keep the layout the struct was designed with and a
 * thread's writes to the end of its table (tag_runs_written, the last
 * pages) never share a line with the next thread's heap. Four threads
 * alive at once hold four structs, none of them pooled. */
enum { ALIGN_THREADS = 4 };
static pthread_barrier_t align_barrier;
static uintptr_t align_heap[ALIGN_THREADS], align_table[ALIGN_THREADS];
static void *heap_align_thread(void *arg) {
  void *p = tes_malloc(32);
  align_heap[(uintptr_t)arg] = (uintptr_t)tes_tls_heap;
  align_table[(uintptr_t)arg] = (uintptr_t)tes_tls_slices;
  pthread_barrier_wait(&align_barrier); /* all alive at once: no struct is reused */
  tes_free(p);
  return NULL;
}
static void heap_structs_aligned(void) {
  pthread_t t[ALIGN_THREADS];
  REQUIRE(pthread_barrier_init(&align_barrier, NULL, ALIGN_THREADS) == 0, "barrier");
  for (uintptr_t i = 0; i < ALIGN_THREADS; i++)
    REQUIRE(pthread_create(&t[i], NULL, heap_align_thread, (void *)i) == 0, "pthread_create");
  for (int i = 0; i < ALIGN_THREADS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&align_barrier);
  for (int i = 0; i < ALIGN_THREADS; i++) {
    CHECK(align_heap[i] % 64 == 0, "thread %d's heap struct at %#lx is not on a cache line of its own", i,
          (unsigned long)align_heap[i]);
    CHECK(align_table[i] % 64 == 0, "thread %d's slice table at %#lx is not line-aligned", i,
          (unsigned long)align_table[i]);
  }
}

static void neighbour_units(void) {
  size_t span = (size_t)(NEIGHBOURS + 1) << TES_SEGMENT_SHIFT;
  uint8_t *map = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(map != MAP_FAILED, "mmap");
  /* Four units starting at a multiple of 4 units: one byte of the map. */
  uintptr_t first = ((uintptr_t)map + TES_SEGMENT_SIZE - 1) & ~(uintptr_t)TES_SEGMENT_MASK;
  while (((first >> TES_SEGMENT_SHIFT) & 3) != 0) first -= TES_SEGMENT_SIZE;
  size_t span2 = (size_t)8 << TES_SEGMENT_SHIFT;
  munmap(map, span);
  map = mmap((void *)first, span2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(map != MAP_FAILED, "mmap at a 16 MiB boundary");
  if ((uintptr_t)map != first || tes_segment_find(map) != NULL) { /* the hint was not honoured, or is ours */
    printf("neighbour units: skipped (no free 16 MiB-aligned range)\n");
    munmap(map, span2);
    return;
  }
  pthread_t threads[NEIGHBOURS];
  for (uintptr_t i = 0; i < NEIGHBOURS; i++) {
    fake[i] = (tes_segment_t *)(first + (i << TES_SEGMENT_SHIFT));
    fake[i]->size = TES_SEGMENT_SIZE;
  }
  for (uintptr_t i = 0; i < NEIGHBOURS; i++) REQUIRE(pthread_create(&threads[i], NULL, toggle_unit, (void *)i) == 0, "thread");
  for (int i = 0; i < NEIGHBOURS; i++) pthread_join(threads[i], NULL);
  CHECK(atomic_load(&neighbour_errors) == 0, "%d reads of a unit lost its own thread's store", atomic_load(&neighbour_errors));
  for (int i = 0; i < NEIGHBOURS; i++) CHECK(tes_segmap_get(fake[i]) == 0, "unit %d left in the map", i);
  munmap(map, span2);
}

int main(void) {
  /* Our blocks. */
  size_t sizes[] = {16, 100, 1000, 8192, 9000, 100000, 131072, 200000, (size_t)3 << 20, (size_t)9 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = tes_malloc(sizes[i]);
    REQUIRE(p != NULL, "tes_malloc(%zu)", sizes[i]);
    tes_segment_t *seg = tes_segment_find(p);
    CHECK(seg == tes_segment_of(p), "size %zu: segment %p, mask gives %p", sizes[i], (void *)seg,
          (void *)tes_segment_of(p));
    CHECK(tes_owned_segment(p, false) == seg, "size %zu: not accepted as a block", sizes[i]);
    CHECK(tes_segment_find(p + sizes[i] - 1) == seg, "size %zu: last byte not in the segment", sizes[i]);
    CHECK(seg && (seg->kind == TES_SEG_LARGE) == (sizes[i] > TES_MEDIUM_BLOCK_MAX), "size %zu: kind %u",
          sizes[i], seg ? seg->kind : 99);
    tes_free(p);
  }

  /* A huge alignment puts the block in a tail unit of its segment. */
  size_t big_align = (size_t)16 << 20;
  unsigned char *h = tes_aligned_alloc(big_align, 1000);
  REQUIRE(h != NULL, "aligned_alloc(16 MiB)");
  CHECK(((uintptr_t)h & (big_align - 1)) == 0, "16 MiB alignment not honoured: %p", (void *)h);
  CHECK(tes_segmap_get(h) == 2, "block of a huge-aligned segment: segmap %u, want 2 (tail unit)", tes_segmap_get(h));
  tes_segment_t *hs = tes_segment_find(h);
  CHECK(hs != NULL && (uint8_t *)hs < h && tes_owned_segment(h, false) == hs, "huge-aligned block not found");
  CHECK(tes_usable_size(h) >= 1000, "usable %zu", tes_usable_size(h));
  CHECK(tes_owned_segment(h + 16, false) == NULL, "interior of a large block accepted");
  tes_free(h);

  /* Not ours: refused, never dereferenced. */
  char stack_buffer[64];
  void *foreign = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(foreign != MAP_FAILED, "mmap");
  const void *not_ours[] = {stack_buffer, global_buffer, foreign, (char *)foreign + 4096, NULL,
                            (void *)(uintptr_t)0xdead0000beef0000ull, (void *)(uintptr_t)16};
  for (size_t i = 0; i < sizeof not_ours / sizeof not_ours[0]; i++) {
    CHECK(tes_segment_find(not_ours[i]) == NULL, "foreign %p found a segment", not_ours[i]);
    CHECK(tes_owned_segment(not_ours[i], false) == NULL, "foreign %p accepted", not_ours[i]);
    CHECK(tes_usable_size(not_ours[i]) == 0, "foreign %p has a usable size", not_ours[i]);
  }
  munmap(foreign, 1 << 20);

  /* A freed large block's segment sits in the cache, unmapped from the
   * segment map: a second free is refused, not fed to a list. */
  void *large = tes_malloc(300000);
  tes_segment_t *ls = tes_segment_of(large);
  tes_free(large);
  CHECK(tes_segmap_get(large) == 0, "cached segment still in the segment map");
  CHECK(tes_owned_segment(large, false) == NULL, "freed large block still accepted");
  (void)ls;

  /* The slice table holds exactly the block pages of our segments. */
  void *small = tes_malloc(64);
  tes_heap_t *heap = tes_tls_heap;
  size_t slot;
  CHECK(tes_slice_hit(heap->slices, small, &slot), "own block's slice missing from the table");
  CHECK(heap->slices->entry[slot].page == tes_page_of(tes_segment_of(small), small), "slice table gives the wrong page");
  CHECK(!tes_slice_hit(heap->slices, tes_segment_of(small), &slot), "header slice is in the table");
  tes_free(small);
  CHECK(tes_tls_slices == heap->slices, "the TLS slice table is not the heap's");
  pthread_t tls_thread;
  REQUIRE(pthread_create(&tls_thread, NULL, tls_slices_thread, NULL) == 0, "pthread_create");
  pthread_join(tls_thread, NULL);
  CHECK(tls_slices_errors == 0, "%d errors in a new thread's TLS slice table", (int)tls_slices_errors);
  pooled_table_cleared();
  heap_structs_aligned();
  neighbour_units();
  return unit_finish("unit_segment");
}
