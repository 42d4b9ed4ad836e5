/* large.c — blocks above the largest size class (128 KiB).
 *
 * Each large block has a segment of its own: header at the segment start, the
 * block at large_offset (512 bytes, or the requested alignment), size rounded
 * to 4 MiB. Freeing puts the segment into the shared segment cache (bounded,
 * purged after the purge delay), so repeated multi-megabyte alloc/free cycles
 * do not become mmap/munmap storms. realloc stays in place while the block
 * fits its segment and otherwise grows it with mremap (page tables move, no
 * bytes are copied). Large segments have thread id TES_TID_SHARED: any thread
 * frees them directly (no hand-off to the allocating thread). All large
 * segments are on one list (for tes_heap_visit and tes_heap_destroy) guarded
 * by large_lock. Called from heap.c (allocation), free.c and alloc.c. */
#include "internal.h"

_Atomic int64_t tes_large_in_use, tes_large_in_use_peak;
static tes_lock_t large_lock = TES_LOCK_INIT;
tes_segment_t *tes_large_list;

#define LARGE_HEADER_BYTES (offsetof(tes_segment_t, pages) + sizeof(tes_page_t))
#define LARGE_MAX_SIZE ((size_t)1 << 46)
#define LARGE_TAIL_PURGE ((size_t)1 << 20) /* purge a reused segment's dirty tail beyond this */

void tes_large_lock(void) { tes_lock(&large_lock); }
void tes_large_unlock(bool child) {
  if (child) tes_lock_reset(&large_lock);
  else tes_unlock(&large_lock);
}

static void in_use_add(int64_t delta) {
  int64_t now = atomic_fetch_add_explicit(&tes_large_in_use, delta, memory_order_relaxed) + delta;
  int64_t peak = atomic_load_explicit(&tes_large_in_use_peak, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak(&tes_large_in_use_peak, &peak, now)) {
  }
}

static size_t round_up(size_t x, size_t to) { return (x + to - 1) & ~(to - 1); }

/* Usable bytes of a large block of `size` at `offset`: whole OS pages. The
 * hardened build ends the block exactly at a page boundary (the guard page
 * follows it directly), so the block is rounded from the segment start. */
static size_t block_usable(size_t offset, size_t size) {
  size_t page = tes_os_page_size();
#if TES_SECURE
  return round_up(offset + size + TES_PADDING, page) - offset;
#else
  (void)offset;
  size_t usable = round_up(size, page);
  return usable == 0 ? page : usable; /* aligned_alloc(big, 0) still gets a block */
#endif
}

static void list_insert(tes_segment_t *seg) {
  tes_lock(&large_lock);
  seg->prev = NULL;
  seg->next = tes_large_list;
  if (tes_large_list) tes_large_list->prev = seg;
  tes_large_list = seg;
  tes_unlock(&large_lock);
}

static void list_remove_locked(tes_segment_t *seg) {
  if (seg->prev) seg->prev->next = seg->next;
  else tes_large_list = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
}

/* Give back the dirty memory beyond `keep` bytes from the segment start. */
static void purge_tail(tes_segment_t *seg, size_t keep) {
  size_t page = tes_os_page_size();
  keep = round_up(keep, page);
  if (seg->dirty_end > keep + LARGE_TAIL_PURGE) {
    size_t len = round_up(seg->dirty_end, page) - keep;
    if (tes_os_purge((uint8_t *)seg + keep, len, true)) seg->dirty_end = keep;
  }
}

void *tes_large_alloc(tes_heap_t *heap, size_t size, size_t alignment, bool zero) {
  size_t page_size = tes_os_page_size();
  if (size > LARGE_MAX_SIZE || alignment > TES_MAX_ALIGNMENT) {
    heap->counters.malloc_failed++;
    errno = ENOMEM;
    return NULL;
  }
  /* Large blocks come and go through the segment cache without touching the
   * small-object slow path, which is where due cache purges are otherwise
   * run: check here too, so freed large memory leaves RSS after the purge
   * delay even in a program that only churns large blocks. (A flag check
   * when nothing cached is dirty.) */
  tes_cache_purge(false);
  size_t offset = TES_LARGE_OFFSET;
  if (alignment > offset) offset = alignment;
  size_t usable = block_usable(offset, size);
  size_t total = round_up(offset + usable + (TES_SECURE ? page_size : 0), TES_SEGMENT_SIZE);
  tes_segment_t *seg = tes_segment_obtain(total, alignment > TES_SEGMENT_SIZE ? alignment : TES_SEGMENT_SIZE);
  if (seg == NULL) {
    heap->counters.malloc_failed++;
    errno = ENOMEM;
    return NULL;
  }
  size_t seg_size = seg->size, dirty = seg->dirty_end, purged = seg->purged_bytes;
  memset(seg, 0, LARGE_HEADER_BYTES);
  seg->size = seg_size;
  seg->dirty_end = dirty;
  if (purged) tes_os_commit_note((int64_t)purged); /* the whole span counts as committed again */
  /* A reused segment may hold a dirty tail beyond the new block (a previous,
   * longer block, or a whole segment of small pages): give it back now when
   * it is more than LARGE_TAIL_PURGE, so RSS follows what is in use; a
   * shorter tail waits for the segment's next idle time in the cache, so
   * large blocks cycling through the cache cost no system call. */
  purge_tail(seg, offset + usable);
  if (seg->dirty_end < offset + usable) seg->dirty_end = offset + usable;
  seg->page_shift = 63;
  seg->kind = TES_SEG_LARGE;
  seg->page_count = 1;
  seg->used_pages = 1;
  seg->large_offset = offset;
  seg->cookie = (uintptr_t)seg ^ tes_process_key;
  atomic_store_explicit(&seg->thread_id, TES_TID_SHARED, memory_order_relaxed);
  tes_page_t *page = &seg->pages[0];
  page->area = (uint8_t *)seg + offset;
  page->block_size = usable;
  page->reserved = page->capacity = page->used = 1;
  page->in_use = 1;
  page->class_index = 0xff;
  atomic_store_explicit(&page->heap, heap, memory_order_relaxed);
#if TES_SECURE
  page->key = (uintptr_t)tes_random_next() | 1;
  /* Guard page right after the block. */
  tes_os_protect(page->area + usable, page_size);
#endif
  if (zero && dirty > offset) {
    size_t n = dirty - offset;
    memset(page->area, 0, n < usable ? n : usable);
  }
  list_insert(seg);
  tes_segmap_set(seg, true);
  in_use_add((int64_t)usable);
  heap->counters.large_allocs++;
#if TES_SECURE
  tes_secure_on_alloc(page, page->area, size);
#endif
  return page->area;
}

void tes_large_free(tes_segment_t *seg) {
  tes_page_t *page = &seg->pages[0];
  in_use_add(-(int64_t)page->block_size);
#if TES_SECURE
  tes_os_unprotect(page->area + page->block_size, tes_os_page_size());
#endif
  page->in_use = 0;
  tes_lock(&large_lock);
  list_remove_locked(seg);
  tes_unlock(&large_lock);
  seg->used_pages = 0;
  tes_segment_free(seg);
}

size_t tes_large_usable(const tes_segment_t *seg) { return seg->pages[0].block_size - TES_PADDING; }

bool tes_large_owned_block(const tes_segment_t *seg, const void *p) {
  return seg->kind == TES_SEG_LARGE && seg->pages[0].in_use && (const uint8_t *)p == seg->pages[0].area;
}

void *tes_large_realloc(tes_segment_t *seg, void *p, size_t size) {
  tes_page_t *page = &seg->pages[0];
  size_t page_size = tes_os_page_size();
  if (size > LARGE_MAX_SIZE) return NULL;
  size_t offset = seg->large_offset;
  size_t usable = block_usable(offset, size);
  size_t old_usable = page->block_size;
  if (TES_SECURE || offset + usable <= seg->size) {
    if (TES_SECURE && offset + usable + page_size > seg->size) return NULL;
#if TES_SECURE
    tes_os_unprotect(page->area + old_usable, page_size);
    tes_os_protect(page->area + usable, page_size);
#endif
    page->block_size = usable;
    in_use_add((int64_t)usable - (int64_t)old_usable);
    if (seg->dirty_end < offset + usable) seg->dirty_end = offset + usable;
    if (usable < old_usable) purge_tail(seg, offset + usable);
    return p;
  }
  /* Grow the mapping: mremap keeps the pages, moves them if it must. */
  size_t total = round_up(offset + usable, TES_SEGMENT_SIZE);
  size_t alignment = offset >= TES_SEGMENT_SIZE ? offset : TES_SEGMENT_SIZE;
  tes_lock(&large_lock);
  list_remove_locked(seg);
  tes_unlock(&large_lock);
  tes_segmap_set(seg, false);
  size_t old_size = seg->size;
  tes_segment_t *moved = tes_os_remap(seg, old_size, total, alignment);
  if (moved == NULL) {
    tes_segmap_set(seg, true);
    list_insert(seg);
    return NULL;
  }
  moved->size = total;
  moved->cookie = (uintptr_t)moved ^ tes_process_key;
  page = &moved->pages[0];
  page->area = (uint8_t *)moved + offset;
  page->block_size = usable;
  if (moved->dirty_end < offset + usable) moved->dirty_end = offset + usable;
  list_insert(moved);
  tes_segmap_set(moved, true);
  in_use_add((int64_t)usable - (int64_t)old_usable);
  return page->area;
}

void tes_large_reassign(tes_heap_t *from, tes_heap_t *to, bool release) {
  tes_segment_t *drop = NULL;
  tes_lock(&large_lock);
  tes_segment_t *seg = tes_large_list;
  while (seg != NULL) {
    tes_segment_t *next = seg->next;
    if (atomic_load_explicit(&seg->pages[0].heap, memory_order_relaxed) == from) {
      if (release) {
        list_remove_locked(seg);
        seg->next = drop;
        drop = seg;
      } else {
        atomic_store_explicit(&seg->pages[0].heap, to, memory_order_relaxed);
      }
    }
    seg = next;
  }
  tes_unlock(&large_lock);
  while (drop != NULL) {
    tes_segment_t *next = drop->next;
    tes_page_t *page = &drop->pages[0];
    in_use_add(-(int64_t)page->block_size);
#if TES_SECURE
    tes_os_unprotect(page->area + page->block_size, tes_os_page_size());
#endif
    page->in_use = 0;
    drop->used_pages = 0;
    tes_segment_free(drop);
    drop = next;
  }
}
