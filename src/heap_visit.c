/* heap_visit.c — tes_heap_visit, the walk of live blocks: a block is live
 * when it is carved and on none of its page's free lists (nor in a bin).
 * Its own file because it is cold and built for size (src/CMakeLists.txt:
 * the text segment is part of every process's fixed cost), while the
 * first-class heaps' malloc in heap_api.c is a fast path.
 * Called by applications; never used internally. */
#include "alloc_inline.h"

#define MAX_PAGE_BLOCKS (((size_t)1 << TES_SMALL_PAGE_SHIFT) / 16)

/* One look at a page, taken by page_snapshot: the walk visits the blocks of
 * [area, area + count * block_size) whose bit in free_map is clear. */
typedef struct page_snap_s {
  const uint8_t *area;
  size_t block_size, count;
  unsigned class_index;
  const tes_heap_t *heap;
  uint8_t free_map[MAX_PAGE_BLOCKS / 8];
} page_snap_t;

/* The walk of another thread's heap (or of every heap) reads pages and
 * lists that their threads change under it, locally and without atomics
 * (the fast paths pop and push them), and follows links stored in free
 * blocks that may be handed out and written by the program meanwhile. That
 * cannot be ordered without a cost on every malloc and free, so the walk
 * takes a snapshot instead, in the functions marked TES_RACY_SNAPSHOT
 * below, and only there:
 *  - every field of the page is read once, by a relaxed atomic load, into
 *    the snapshot (no re-read, no torn value), and every decision uses the
 *    snapshot (the hardened build's link keys are read where a link is
 *    decoded: a key changed meanwhile only ends that list's marking early);
 *  - in_use is read with acquire: tes_page_init stores it with release
 *    after the page's geometry, so a page in use has its block size, area
 *    and reserve (never a block size of 0 from a page set up meanwhile);
 *  - a block is read only once it is known to be a block of the snapshot
 *    (mark_list) or to pass tes_maybe_small_block (mark_mixed_list), at
 *    most a bounded number of them, in segments that cannot be freed
 *    under the walk (the segments lock, or the walker's own heap).
 * The result is a snapshot: a block handed out or freed during the walk may
 * be reported either way. ThreadSanitizer is told not to instrument these
 * reads (they race by design, as above); everything else of the walk, the
 * segment and large lists, the locks and the visitor, stays instrumented
 * (sanitize.lib_visit_foreign). */
#if defined(__SANITIZE_THREAD__)
#define TES_RACY_SNAPSHOT __attribute__((no_sanitize_thread, noinline))
#else
#define TES_RACY_SNAPSHOT
#endif
#define RACY_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static void mark_block(page_snap_t *snap, size_t i) { snap->free_map[i >> 3] |= (uint8_t)(1u << (i & 7)); }

/* Mark the snapshot's blocks on one of the page's own lists. */
TES_RACY_SNAPSHOT static void mark_list(const tes_page_t *page, page_snap_t *snap, const tes_block_t *b) {
  size_t limit = snap->count;
  while (b != NULL && limit-- > 0) {
    size_t offset = (size_t)((const uint8_t *)b - snap->area);
    if ((const uint8_t *)b < snap->area || offset % snap->block_size != 0 || offset / snap->block_size >= snap->count)
      return;
    mark_block(snap, offset / snap->block_size);
    b = (const tes_block_t *)tes_link_decode(page, (uintptr_t)RACY_LOAD(tes_block_link_at(b, snap->block_size)->next));
  }
}

/* Mark this page's blocks on a list that mixes pages (a bin, a heap's
 * delayed list, whose links the heap's `keys` encode in the hardened build,
 * whose bins hold no links: tes_delayed_encode; raw links otherwise, keys NULL).
 * A running thread changes such a list under the walk, and a link read from
 * a block it just handed out is the program's data: follow only links
 * tes_maybe_small_block accepts, at most `limit` of them. */
TES_RACY_SNAPSHOT static void mark_mixed_list(page_snap_t *snap, const uintptr_t *keys, const tes_block_t *b,
                                             size_t limit) {
  const uint8_t *lo = snap->area, *hi = lo + snap->count * snap->block_size;
  for (size_t n = 0; b != NULL && n < limit && tes_maybe_small_block(b);
       n++, b = (const tes_block_t *)tes_keyed_decode(keys, (uintptr_t)RACY_LOAD(b->next))) {
    if ((const uint8_t *)b < lo || (const uint8_t *)b >= hi) continue;
    mark_block(snap, (size_t)((const uint8_t *)b - lo) / snap->block_size);
  }
}

/* The page's geometry and which of its carved blocks are free, if it is in
 * use and (heap not NULL) that heap's. Free: on the page's three lists, in
 * the heap's bin of the class (default build), or on the heap's delayed
 * list (blocks other threads freed while the page sat in the full queue:
 * they wait there for the owner's next slow path, and the page still counts
 * them as used). */
TES_RACY_SNAPSHOT static bool page_snapshot(const tes_page_t *page, const tes_heap_t *heap, page_snap_t *snap) {
  if (!__atomic_load_n(&page->in_use, __ATOMIC_ACQUIRE)) return false;
  snap->heap = atomic_load_explicit(&page->heap, memory_order_relaxed);
  if (heap != NULL && snap->heap != heap) return false;
  snap->area = RACY_LOAD(page->area);
  snap->block_size = RACY_LOAD(page->block_size);
  snap->class_index = RACY_LOAD(page->class_index);
  snap->count = tes_page_capacity_any_thread(page);
  if (snap->block_size == 0) return false; /* not a page of blocks (cannot happen once in use) */
  if (snap->count > MAX_PAGE_BLOCKS) snap->count = MAX_PAGE_BLOCKS;
  memset(snap->free_map, 0, (snap->count + 7) / 8);
  mark_list(page, snap, RACY_LOAD(page->free));
  mark_list(page, snap, RACY_LOAD(page->local_free));
#if TES_SECURE
  /* Other threads' frees not collected yet: their bits (page.c). */
  const _Atomic uint64_t *bits = tes_remote_bits_at((uintptr_t)snap->area);
  for (size_t w = 0; w * 64 < snap->count; w++)
    for (uint64_t m = atomic_load_explicit(&bits[w], memory_order_acquire); m != 0; m &= m - 1) {
      size_t i = w * 64 + (size_t)__builtin_ctzll(m);
      if (i < snap->count) mark_block(snap, i);
    }
#else
  mark_list(page, snap, tes_tf_list(atomic_load_explicit(&page->xthread_free, memory_order_acquire)));
#endif
#if !TES_SECURE
  /* Blocks waiting in the heap's bin (the owner sets it while it hands the
   * page out, under this walk). */
  const tes_bin_t *bin = RACY_LOAD(page->bin);
  if (bin != NULL) mark_mixed_list(snap, NULL, RACY_LOAD(bin->head), RACY_LOAD(bin->limit));
#else
  /* Blocks waiting in the heap's bin of the class (out of band: slots). */
  if (snap->heap != NULL && snap->class_index >= TES_MEDIUM_CLASS_FIRST && snap->class_index < TES_CLASS_COUNT) {
    const tes_sbin_t *bin = &snap->heap->sbins[snap->class_index - TES_MEDIUM_CLASS_FIRST];
    const uint8_t *lo = snap->area, *hi = lo + snap->count * snap->block_size;
    uint32_t held = RACY_LOAD(bin->count);
    for (uint32_t i = 0; i < held && i < TES_SBIN_SLOTS; i++) {
      const uint8_t *b = (const uint8_t *)RACY_LOAD(bin->slot[i]);
      if (b >= lo && b < hi) mark_block(snap, (size_t)(b - lo) / snap->block_size);
    }
  }
#endif
  if (snap->heap != NULL)
    mark_mixed_list(snap, snap->heap->keys, atomic_load_explicit(&snap->heap->delayed_free, memory_order_acquire),
                    TES_DELAYED_WALK_MAX);
  return true;
}

/* Visit the live blocks of one page; false when the visitor stopped. */
static bool visit_page(const page_snap_t *snap, tes_block_visitor_t *visit, void *arg) {
  tes_block_info_t info;
  info.usable_size = snap->block_size - TES_PADDING;
  info.size_class = snap->class_index;
  info.heap = snap->heap;
  for (size_t i = 0; i < snap->count; i++) {
    if (snap->free_map[i >> 3] & (1u << (i & 7))) continue;
    info.address = (void *)(snap->area + i * snap->block_size);
    if (!visit(&info, arg)) return false;
  }
  return true;
}

static bool visit_segment(const tes_heap_t *heap, const tes_segment_t *seg, tes_block_visitor_t *visit, void *arg) {
  page_snap_t snap;
  for (uint32_t i = 1; i < seg->page_count; i++) {
    if (!page_snapshot(&seg->pages[i], heap, &snap)) continue;
    if (!visit_page(&snap, visit, arg)) return false;
  }
  return true;
}

typedef struct large_item_s {
  void *address;
  size_t usable;
  const tes_heap_t *heap;
} large_item_t;

/* tes_collect from a visitor waits for the walk's end (so do a
 * tes_heap_delete or tes_heap_destroy of the thread's heaps: leave_to_owner,
 * tes_heap_process_deletes): the walk of every
 * heap (or another thread's) holds the segments lock, which the collect takes (it aborted as a
 * lock re-entered), and the walk of one heap reads pages the collect
 * retires. Noted in the thread's heap (thread-local state stays one
 * pointer); a visitor may walk again, hence a depth. */
bool tes_visit_defer_collect(bool force) {
  tes_heap_t *self = tes_tls_heap;
  if (self->visit_depth == 0) return false;
  if (self->visit_collect < (signed char)force) self->visit_collect = (signed char)force;
  return true;
}

static void visit_walk(const tes_heap_t *heap, bool own, tes_block_visitor_t *visit, void *arg);

TES_API void tes_heap_visit(const tes_heap_t *heap, tes_block_visitor_t *visit, void *arg) {
  if (visit == NULL) return;
  tes_process_init();
  tes_heap_t *self = tes_thread_heap_init(); /* NULL (no memory for a heap): nothing noted, as before */
  if (self != NULL && self->visit_depth++ == 0) self->visit_collect = -1;
  /* Only the heap's own thread may walk its segment list unlocked. */
  bool own = heap != NULL && self != NULL && heap->thread_id == self->thread_id;
  visit_walk(heap, own, visit, arg);
  if (self != NULL && --self->visit_depth == 0) {
    tes_heap_process_deletes(self); /* the deletes and destroys asked for during the walk */
    if (self->visit_collect >= 0) tes_collect(self->visit_collect > 0);
  }
}

static void visit_walk(const tes_heap_t *heap, bool own, tes_block_visitor_t *visit, void *arg) {
  bool go_on = true;
  if (own) {
    /* The caller's own heap: its segments cannot go away under us. */
    for (const tes_segment_t *seg = heap->segments; seg != NULL && go_on; seg = seg->next)
      go_on = visit_segment(heap, seg, visit, arg);
  } else {
    /* Every heap, or another thread's, whose segments its thread frees
     * under the walk (its list was walked unlocked: SIGSEGV on a segment
     * unmapped meanwhile): every segment, under the lock, its pages
     * filtered by heap. */
    tes_segments_lock();
    for (const tes_segment_t *seg = tes_segments_all; seg != NULL && go_on; seg = seg->all_next)
      go_on = visit_segment(heap, seg, visit, arg);
    tes_segments_unlock(false);
  }
  /* Large blocks: copy a batch under the lock, call the visitor outside it. */
  enum { BATCH = 128 };
  large_item_t items[BATCH];
  size_t skip = 0;
  while (go_on) {
    size_t n = 0, seen = 0;
    tes_large_lock();
    for (tes_segment_t *seg = tes_large_list; seg != NULL && n < BATCH; seg = seg->next) {
      const tes_heap_t *owner = atomic_load_explicit(&seg->pages[0].heap, memory_order_relaxed);
      if (heap != NULL && owner != heap) continue;
      if (seen++ < skip) continue;
      items[n].address = seg->pages[0].area;
      items[n].usable = seg->pages[0].block_size - TES_LARGE_PADDING;
      items[n].heap = owner;
      n++;
    }
    tes_large_unlock(false);
    for (size_t i = 0; i < n && go_on; i++) {
      tes_block_info_t info = {items[i].address, items[i].usable, UINT32_MAX, items[i].heap};
      go_on = visit(&info, arg);
    }
    if (n < BATCH) break;
    skip += n;
  }
}
