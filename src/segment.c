/* segment.c — segments: 4 MiB-aligned spans carved into pages, the segment
 * map, the retained-segment cache and the abandoned-segment list.
 *
 * Owns: mapping/unmapping segments (through os.c), the header layout, which
 * page of a segment is free (free_mask), purging retired pages, the global
 * cache of fully free segments (bounded by TESSERA_SEGMENT_CACHE, purged after
 * the purge delay, dropped by tes_collect(true)), and the list of segments
 * whose thread exited (adopted by live threads in heap.c).
 * Invariants: tes_segmap marks exactly the segments handed to heaps or large
 * blocks (not cached ones), so free() of a cached/unmapped address is refused;
 * a segment is on at most one list (heap, cache, abandoned, large).
 * Locks: cache_lock and abandoned_lock, leaves (nothing is called under them
 * that takes another lock). */
#include "internal.h"

TES_BIG_BSS uint8_t tes_segmap[TES_SEGMAP_COUNT / 4];

#define SEGMENT_HEADER(count) (offsetof(tes_segment_t, pages) + (count) * sizeof(tes_page_t))
static_assert(SEGMENT_HEADER(TES_SMALL_PAGES) <= ((size_t)1 << TES_SMALL_PAGE_SHIFT),
              "small segment header fits in page 0");
static_assert(SEGMENT_HEADER(1) <= TES_LARGE_OFFSET, "large segment header fits before the block");

/* The cache: segments oldest first, each with its size beside it, so that
 * tes_cache_take scans this array instead of the segments' headers. Every
 * header sits on a 4 MiB boundary, so they all compete for the same few
 * cache sets, and a walk through a list of them missed at nearly every step
 * (a fifth of `mixed`'s time, sampled, when the cache was a linked list). */
typedef struct cache_slot_s {
  tes_segment_t *seg;
  size_t size;
} cache_slot_t;
static tes_lock_t cache_lock = TES_LOCK_INIT;
TES_BIG_BSS static cache_slot_t cache_slots[TES_SEGMENT_CACHE_MAX];
static size_t cache_count, cache_bytes;
/* Earliest ms clock at which a cached segment that is not purged yet is due
 * (INT64_MAX: none). A program that churns large blocks keeps dirty segments
 * in the cache all the time; without this bound every large allocation
 * walked the whole cache (up to 64 headers, all 4 MiB-aligned, so they
 * compete for the same cache sets) to find nothing due: a fifth of the
 * instructions of the `mixed` workload. */
static _Atomic int64_t cache_purge_due = INT64_MAX;
#define CACHE_MAX_BYTES ((size_t)1 << 30)

static tes_lock_t segments_lock_ = TES_LOCK_INIT;
tes_segment_t *tes_segments_all;

/* The last small/medium segments released (tes_segment_free), oldest
 * overwritten first, under segments_lock_ (which the release already
 * takes). Once a segment leaves the segment map, a second free of one of
 * its blocks finds no owner; read on that error path only
 * (tes_segment_released_before), so it is named a double free rather than
 * an invalid free, as large.c's ring does for large blocks. 64 entries,
 * 1 KiB of BSS. */
#define RELEASED_RING 64
static_assert((RELEASED_RING & (RELEASED_RING - 1)) == 0, "the index wraps by masking");
static struct released_s {
  uintptr_t first, end; /* its pages past the header's (no block starts before) */
} released_ring[RELEASED_RING];
static unsigned released_next;

static tes_lock_t abandoned_lock_ = TES_LOCK_INIT;
tes_segment_t *tes_abandoned_list;   /* newest first */
static tes_segment_t *abandoned_tail; /* the oldest: tes_abandoned_pop's end */
static _Atomic size_t abandoned_count;

/* ---- segment map ----------------------------------------------------------- */
/* Units of the map a segment of `size` bytes covers: a large block's
 * segment is mapped to the OS page, so its last unit may be partly its own
 * (tes_segment_find then checks the size; the rest of that unit is never
 * one of our segments, whose starts are all unit-aligned). */
static size_t units_of(size_t size) { return (size + TES_SEGMENT_SIZE - 1) >> TES_SEGMENT_SHIFT; }

/* A unit's two bits, by one atomic OR or AND: the three other units of the
 * byte may belong to segments other threads are mapping or unmapping. A
 * unit is only ever set from 0 (a segment leaves the map before its memory
 * is reused) or cleared, so OR and AND suffice (a compare-and-swap loop
 * cost 52 instructions a call, 21 with the byte stores before). */
static void unit_store(uintptr_t unit, uint8_t value) {
  uint8_t *byte = &tes_segmap[unit >> 2];
  unsigned shift = (unsigned)(unit & 3) * 2;
  if (value != 0) tes_rmw_or8(byte, (uint8_t)(value << shift));
  else tes_rmw_and8(byte, (uint8_t)~(3u << shift));
}

static unsigned unit_load(uintptr_t unit) {
  return (__atomic_load_n(&tes_segmap[unit >> 2], __ATOMIC_ACQUIRE) >> ((unit & 3) * 2)) & 3;
}

/* The first unit apart from the rest, whose value the loop no longer
 * chooses at every unit: most segments have one unit (27-29 instructions a
 * call, twice a large malloc+free cycle; 34 before). */
void tes_segmap_set(tes_segment_t *seg, bool present) {
  uintptr_t unit = (uintptr_t)seg >> TES_SEGMENT_SHIFT;
  uintptr_t end = unit + units_of(seg->size);
  if (end > TES_SEGMAP_COUNT) end = TES_SEGMAP_COUNT;
  if (unit >= end) return;
  unit_store(unit, present ? TES_UNIT_START : TES_UNIT_NONE);
  for (uintptr_t tail = unit + 1; tail < end; tail++) unit_store(tail, present ? TES_UNIT_INSIDE : TES_UNIT_NONE);
}

void tes_segmap_shrink(tes_segment_t *seg, size_t new_size) {
  uintptr_t unit = (uintptr_t)seg >> TES_SEGMENT_SHIFT;
  for (size_t i = units_of(new_size); i < units_of(seg->size) && unit + i < TES_SEGMAP_COUNT; i++) unit_store(unit + i, TES_UNIT_NONE);
}

/* A unit that hosts several large blocks (large.c, "packed" blocks):
 * TES_UNIT_HOST in the map; its blocks are found through the host's table. */
void tes_segmap_set_host(tes_segment_t *host) { unit_store((uintptr_t)host >> TES_SEGMENT_SHIFT, TES_UNIT_HOST); }

tes_segment_t *tes_segment_find(const void *p) {
  uintptr_t unit = (uintptr_t)p >> TES_SEGMENT_SHIFT;
  if (unit >= TES_SEGMAP_COUNT) return NULL;
  unsigned v = unit_load(unit);
  if (v == TES_UNIT_HOST) return tes_packed_segment_of(p);
  while (v == TES_UNIT_INSIDE && unit > 0) v = unit_load(--unit);
  if (v != TES_UNIT_START) return NULL;
  tes_segment_t *seg = (tes_segment_t *)(unit << TES_SEGMENT_SHIFT);
  if ((uintptr_t)p >= (uintptr_t)seg + seg->size) return NULL;
  return seg;
}

/* ---- mapping and the cache --------------------------------------------------- */
static tes_segment_t *map_segment(size_t size, size_t alignment) {
  if (alignment < TES_SEGMENT_SIZE) alignment = TES_SEGMENT_SIZE;
  tes_segment_t *seg = tes_os_map_aligned(size, alignment);
  if (seg == NULL) return NULL;
  if (((uintptr_t)seg + size) >> TES_ADDRESS_BITS) { /* beyond the segment map: refuse */
    tes_os_unmap(seg, size);
    errno = ENOMEM;
    return NULL;
  }
  if (tes_opt(TES_OPTION_HUGE_PAGES)) tes_os_huge_pages(seg, size, true);
#if TES_SECURE
  /* Once per mapping: the guards stay while the segment is cached and
   * reused, whatever it is used for next. */
  tes_secure_guard_segment(seg, size);
#endif
  seg->size = size;
  seg->purged_bytes = 0;
  seg->dirty_end = 0;
  seg->clean_below = size;
  seg->cache_purged = false;
  return seg;
}

static void unmap_segment(tes_segment_t *seg) {
  tes_os_commit_note(-(int64_t)(seg->size - seg->purged_bytes));
  tes_os_unmap(seg, seg->size);
}

/* Under cache_lock: slot i leaves the cache. */
static tes_segment_t *cache_remove_locked(size_t i) {
  tes_segment_t *seg = cache_slots[i].seg;
  cache_bytes -= cache_slots[i].size;
  /* The newest slot, which a take finds first, moves nothing: no call. */
  size_t after = cache_count - i - 1;
  if (after != 0) memmove(&cache_slots[i], &cache_slots[i + 1], after * sizeof cache_slots[0]);
  __atomic_store_n(&cache_count, cache_count - 1, __ATOMIC_RELAXED);
  return seg;
}

tes_segment_t *tes_cache_take(size_t min_size, size_t max_size, size_t alignment) {
  /* Unlocked peek so an empty cache costs no lock. */
  if (__atomic_load_n(&cache_count, __ATOMIC_RELAXED) == 0) return NULL;
  tes_segment_t *found = NULL;
  tes_lock(&cache_lock);
  /* Newest first: the first segment of exactly min_size (large blocks'
   * mappings come in a few sizes, see large.c), else the first that fits:
   * taking the first fit alone let small blocks use up the larger segments,
   * and the larger blocks then mapped new ones (`mixed`: 1.9x the mmap
   * calls). */
  size_t at = SIZE_MAX;
  /* Two passes, the first with one compare a slot: the scan cost 117
   * instructions a take in `mixed` (about ten slots down to the exact
   * match) when one pass tested both at every slot, 60 now. */
  for (size_t i = cache_count; i-- > 0;) {
    if (cache_slots[i].size == min_size && ((uintptr_t)cache_slots[i].seg & (alignment - 1)) == 0) {
      at = i;
      break;
    }
  }
  for (size_t i = cache_count; at == SIZE_MAX && i-- > 0;) {
    const cache_slot_t *slot = &cache_slots[i];
    if (slot->size >= min_size && slot->size <= max_size && ((uintptr_t)slot->seg & (alignment - 1)) == 0) at = i;
  }
  if (at != SIZE_MAX) found = cache_remove_locked(at);
  tes_unlock(&cache_lock);
  return found;
}

static TES_NOINLINE void purge_cached(tes_segment_t *seg) {
  /* Keep the first OS page: it holds the cache links. */
  size_t keep = tes_os_page_size();
  size_t end = (seg->dirty_end + keep - 1) & ~(keep - 1); /* nothing beyond was ever touched */
  if (end > seg->size) end = seg->size;
  bool zero = end <= keep || tes_os_purge((uint8_t *)seg + keep, end - keep, tes_opt(TES_OPTION_PURGE_DECOMMIT) != 0);
  tes_os_commit_note(-(int64_t)(seg->size - keep - seg->purged_bytes));
  seg->purged_bytes = seg->size - keep;
  seg->cache_purged = true;
  if (zero) seg->dirty_end = keep, seg->clean_below = seg->size;
}

/* Cached segments are purged with cache_lock let go: a purge takes them out
 * of the cache (cache_out_locked, chained through their headers), purges
 * them, and puts them back as its oldest (cache_back_locked). Held over the
 * madvise calls, the lock kept every segment freed or taken (thread exits,
 * large blocks, new segments) waiting on a sweep (PERFORMANCE.md,
 * twenty-fourth session). Out, a segment is nobody's: a take does not find
 * it, and a forced purge waits for it (cache_out). */
static unsigned cache_out;
/* The rare paths' lock (inlined, the lock's loop is 124 bytes of text). */
static TES_NOINLINE void cache_lock_take(void) { tes_lock(&cache_lock); }

static void cache_out_locked(size_t i, tes_segment_t ***tail) {
  tes_segment_t *seg = cache_remove_locked(i);
  seg->next = NULL;
  **tail = seg;
  *tail = &seg->next;
  cache_out++;
}

/* `list` purged (oldest first), under cache_lock: back in front of the
 * cache's slots. Returned: those no slot was left for (only at
 * TESSERA_SEGMENT_CACHE's top), to be unmapped once the lock is let go. */
static tes_segment_t *cache_back_locked(tes_segment_t *list) {
  size_t n = 0;
  for (tes_segment_t *s = list; s != NULL; s = s->next) n++;
  cache_out -= (unsigned)n;
  tes_segment_t *drop = NULL, **drop_tail = &drop;
  for (; cache_count + n > TES_SEGMENT_CACHE_MAX; n--) {
    *drop_tail = list;
    drop_tail = &list->next;
    list = list->next;
  }
  *drop_tail = NULL;
  memmove(&cache_slots[n], &cache_slots[0], cache_count * sizeof cache_slots[0]);
  for (size_t k = 0; k < n; k++, list = list->next) {
    cache_slots[k] = (cache_slot_t){list, list->size};
    cache_bytes += list->size;
  }
  __atomic_store_n(&cache_count, cache_count + n, __ATOMIC_RELAXED);
  return drop;
}

static void unmap_chain(tes_segment_t *list) {
  while (list != NULL) {
    tes_segment_t *next = list->next;
    unmap_segment(list);
    list = next;
  }
}

/* The segments cache_out_locked took (cache_lock held, let go here):
 * purged, then back. */
static TES_NOINLINE void cache_purge_out(tes_segment_t *list, int64_t now) {
  tes_unlock(&cache_lock);
  if (list == NULL) return;
  for (tes_segment_t *s = list; s != NULL; s = s->next) {
    purge_cached(s);
    s->cache_expire = now;
  }
  cache_lock_take();
  tes_segment_t *drop = cache_back_locked(list);
  tes_unlock(&cache_lock);
  unmap_chain(drop);
}


void tes_cache_put(tes_segment_t *seg) {
  tes_segmap_set(seg, false);
  int64_t now = tes_os_clock_ms();
  int64_t delay = tes_purge_delay(now);
  size_t limit = (size_t)tes_opt(TES_OPTION_SEGMENT_CACHE);
  seg->cache_purged = false;
  seg->cache_expire = now; /* when it was freed; once purged, when that was */
  if (delay <= 0) purge_cached(seg);
  tes_segment_t *evict = NULL;
  bool sooner = false;
  tes_lock(&cache_lock);
  if (limit == 0 || seg->size > CACHE_MAX_BYTES) {
    evict = seg;
  } else {
    while (cache_count > 0 && (cache_count >= limit || cache_bytes + seg->size > CACHE_MAX_BYTES)) {
      tes_segment_t *old = cache_remove_locked(0); /* the oldest */
      tes_unlock(&cache_lock);
      unmap_segment(old);
      tes_lock(&cache_lock);
    }
    cache_slots[cache_count] = (cache_slot_t){seg, seg->size};
    __atomic_store_n(&cache_count, cache_count + 1, __ATOMIC_RELAXED);
    cache_bytes += seg->size;
    if (!seg->cache_purged) {
      int64_t due = seg->cache_expire + delay;
      if (due < atomic_load_explicit(&cache_purge_due, memory_order_relaxed)) {
        atomic_store_explicit(&cache_purge_due, due, memory_order_relaxed);
        sooner = true;
      }
    }
  }
  tes_unlock(&cache_lock);
  /* Only a purge that falls due sooner than the one already set can need
   * the purge thread earlier than it plans to wake (and the notification
   * is a full fence: once per large free, it cost time in `mixed`). */
  if (sooner) tes_purge_thread_notify();
  if (evict) unmap_segment(evict);
}

size_t tes_cache_count(void) { return __atomic_load_n(&cache_count, __ATOMIC_RELAXED); }

int64_t tes_cache_purge_due(void) { return atomic_load_explicit(&cache_purge_due, memory_order_relaxed); }

void tes_cache_purge(bool force) {
  /* The dirty tails of live large blocks fall due on the same schedule (one
   * atomic load when none is pending). */
  tes_large_purge_tails(force);
  int64_t now = 0;
  if (!force) {
    if (atomic_load_explicit(&cache_purge_due, memory_order_relaxed) == INT64_MAX) return;
    now = tes_os_clock_ms();
    if (now < atomic_load_explicit(&cache_purge_due, memory_order_relaxed)) return;
  }
  if (force) cache_lock_take();
  else if (!tes_trylock(&cache_lock)) return;
  while (force && cache_out != 0) { /* another thread's purge: they come back, to be unmapped too */
    tes_unlock(&cache_lock);
    tes_os_yield();
    cache_lock_take();
  }
  if (force) {
    /* Chained through their headers, to be unmapped outside the lock. */
    tes_segment_t *list = NULL;
    for (size_t i = 0; i < cache_count; i++) {
      cache_slots[i].seg->next = list;
      list = cache_slots[i].seg;
    }
    __atomic_store_n(&cache_count, 0, __ATOMIC_RELAXED);
    cache_bytes = 0;
    atomic_store(&cache_purge_due, INT64_MAX);
    tes_unlock(&cache_lock);
    unmap_chain(list);
    return;
  }
  int64_t delay = tes_purge_delay(now);
  int64_t next_due = INT64_MAX;
  tes_segment_t *out = NULL, **tail = &out;
  for (size_t i = 0; i < cache_count;) {
    tes_segment_t *s = cache_slots[i].seg;
    if (!s->cache_purged && now - s->cache_expire >= delay) {
      cache_out_locked(i, &tail); /* the slots after it move down one */
      continue;
    }
    if (!s->cache_purged && s->cache_expire + delay < next_due) next_due = s->cache_expire + delay;
    i++;
  }
  atomic_store(&cache_purge_due, next_due);
  cache_purge_out(out, now);
}

/* A large block that no cached segment fits is about to map `bytes` of
 * new memory: first give back what cached segments still hold resident,
 * oldest first, up to as much. glibc unmaps such a block at its free; the
 * cache kept it for the purge delay, so a program that frees a big buffer
 * and then asks for a bigger one held both (a buffer freed and taken again
 * 10 MiB larger each time up to 100 MiB peaked at 196 MB against glibc's
 * 104 MB; `sort -S 100M` at 139 MB against 104 MB). The segments stay
 * cached, purged, for a later request of their size. */
static void purge_cached_before_map(size_t bytes) {
  if (atomic_load_explicit(&cache_purge_due, memory_order_relaxed) == INT64_MAX) return; /* none resident */
  int64_t now = tes_os_clock_ms();
  cache_lock_take();
  size_t done = 0;
  tes_segment_t *out = NULL, **tail = &out;
  for (size_t i = 0; i < cache_count && done < bytes;) { /* oldest first */
    tes_segment_t *s = cache_slots[i].seg;
    if (s->cache_purged) {
      i++;
      continue;
    }
    done += s->size - s->purged_bytes;
    cache_out_locked(i, &tail);
  }
  cache_purge_out(out, now);
}

tes_segment_t *tes_segment_obtain(size_t size, size_t alignment) {
  if (alignment < TES_SEGMENT_SIZE) alignment = TES_SEGMENT_SIZE;
  /* A small segment is exactly one unit. A large block takes a cached
   * segment up to four times its mapping (two powers of two up, large.c's
   * mapping_size) below a unit, up to half as large again above. It took
   * any up to one unit: a 200 KiB block held a 2 or 4 MiB segment, the
   * larger blocks then mapped new ones, and the segments ratcheted up in
   * size, each reused at every size and dirty over its whole length
   * (`mixed`: peak RSS 84 MB, now 62 MB; glibc 60 MB, tcmalloc 62 MB;
   * mmap calls 135 -> 191 a run). Twice the mapping made `mixed` 47 MB but
   * left the dirty 4 MiB segments a program's freed small pages gave the
   * cache unused by its blocks under 1 MiB (`footprint`: 120 -> 141 MB). */
  size_t max = size == TES_SEGMENT_SIZE ? size : size < TES_SEGMENT_SIZE ? 4 * size : size + size / 2;
  tes_segment_t *seg = tes_cache_take(size, max, alignment);
  /* No unit cached: an empty host of packed blocks kept as a spare is one
   * (footprint's small refill after its large phase: 37 MB at its end, 65
   * MB while eight spares kept their dirty granules and it mapped anew). */
  if (seg == NULL && size == TES_SEGMENT_SIZE && tes_large_spare_to_cache()) seg = tes_cache_take(size, max, alignment);
  if (seg != NULL) {
    if (seg->cache_purged) tes_purge_note_retake(seg->cache_expire, seg->size); /* purged, and wanted again: how soon? */
    return seg;
  }
  int saved = errno;
  /* Blocks of more than a unit only: a smaller one would purge memory
   * that the next small segment or large block takes again dirty. */
  if (size > TES_SEGMENT_SIZE) purge_cached_before_map(size);
  seg = map_segment(size, alignment);
  if (seg == NULL) {
    /* Out of address space or mappings: drop the cache and try once more
     * (when that works, the first try's ENOMEM must not outlive it). */
    tes_cache_purge(true);
    seg = map_segment(size, alignment);
    if (seg != NULL) errno = saved;
    else if (tes_opt(TES_OPTION_VERBOSE))
      tes_message("out of memory: cannot map %zu bytes (alignment %zu)", size, alignment);
  }
  return seg;
}

/* ---- small and medium segments ------------------------------------------------ */
/* The owning thread's slice table (the free fast path) maps the slices of
 * the pages in use, and only those: a free into any other page of the
 * segment (never handed out, or retired since) misses it and takes the slow
 * path, which finds no page in use there and reports. */
static void page_slices_set(tes_heap_t *heap, tes_segment_t *seg, unsigned index, bool present) {
  tes_heap_t *table = heap->thread_default ? heap->thread_default : heap;
  unsigned per_page = 1u << (seg->page_shift - TES_SLICE_SHIFT);
  uintptr_t first = tes_slice_of(seg) + (uintptr_t)index * per_page;
  for (unsigned i = 0; i < per_page; i++) {
    uintptr_t slice = first + i;
    if (present) tes_slice_set(table, slice, &seg->pages[index]);
    else if ((table->slices->tag[tes_slice_slot(slice)] & ~TES_SLICE_MEDIUM) == slice)
      table->slices->tag[tes_slice_slot(slice)] = UINTPTR_MAX;
  }
}

/* Linking reads the descriptors of the pages handed out only (a page's free
 * bit is cleared before it is put in use, set again after it retires): a
 * new segment's descriptors, three OS pages never written, were read one by
 * one, and each read of untouched memory is a fault (for the zero page):
 * three of a small program's first malloc's dozen (PERFORMANCE.md,
 * twenty-sixth session, start26). */
static void owned_set(tes_heap_t *heap, tes_segment_t *seg, bool present) {
  if (present) {
    uint64_t all = seg->page_count >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << seg->page_count) - 1;
    for (uint64_t taken = all & ~seg->free_mask & ~(uint64_t)1; taken != 0; taken &= taken - 1) {
      unsigned i = (unsigned)__builtin_ctzll(taken);
      if (seg->pages[i].in_use) page_slices_set(heap, seg, i, true);
    }
    return;
  }
  for (unsigned i = 1; i < seg->page_count; i++) page_slices_set(heap, seg, i, false);
}

void tes_segment_link(tes_heap_t *heap, tes_segment_t *seg) {
  owned_set(heap, seg, true);
  seg->heap = heap;
  seg->prev = NULL;
  seg->next = heap->segments;
  if (heap->segments) heap->segments->prev = seg;
  heap->segments = seg;
  seg->in_free_list = false;
  if (seg->free_mask != 0) {
    seg->free_prev = NULL;
    seg->free_next = heap->free_segments[seg->kind];
    if (seg->free_next) seg->free_next->free_prev = seg;
    heap->free_segments[seg->kind] = seg;
    seg->in_free_list = true;
  }
}

void tes_segment_unlink(tes_heap_t *heap, tes_segment_t *seg) {
  owned_set(heap, seg, false);
  if (seg->prev) seg->prev->next = seg->next;
  else heap->segments = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
  if (seg->in_free_list) {
    if (seg->free_prev) seg->free_prev->free_next = seg->free_next;
    else heap->free_segments[seg->kind] = seg->free_next;
    if (seg->free_next) seg->free_next->free_prev = seg->free_prev;
    seg->free_next = seg->free_prev = NULL;
    seg->in_free_list = false;
  }
}

static void desc_setup(tes_segment_t *seg, unsigned index);

/* A segment taken back from the cache before its purge is still resident
 * wherever its last user wrote. Those pages go on the heap's purge list as
 * if just retired: whatever this heap does not take (it takes dirty pages
 * first, which cancels their purge) goes back after the purge delay.
 * Before, they stayed resident while any one page of the segment was in
 * use: 16 threads that freed 16 MiB each and idled kept 50 MiB through
 * malloc_trim, against 5 MiB with the cache off. Called with the heap's
 * purge lock held (tes_segment_page_alloc's caller). */
static void schedule_dirty_pages(tes_heap_t *heap, tes_segment_t *seg, size_t dirty_end) {
  size_t page_size = (size_t)1 << seg->page_shift;
  uint64_t mask = 0;
  for (unsigned i = 1; i < seg->page_count && (size_t)i * page_size < dirty_end; i++) {
    desc_setup(seg, i);
    mask |= (uint64_t)1 << i;
  }
  seg->dirty_mask |= mask;
  tes_heap_purge_schedule_pages(heap, seg, mask);
}

/* seg, a unit from the cache or the OS, set up as a segment of the heap's. */
static tes_segment_t *segment_setup(tes_heap_t *heap, tes_segment_kind_t kind, tes_segment_t *seg) {
  bool zero = seg->dirty_end <= tes_os_page_size();
  bool purged = seg->cache_purged;
  uint32_t shift = kind == TES_SEG_SMALL ? TES_SMALL_PAGE_SHIFT : TES_MEDIUM_PAGE_SHIFT;
  uint32_t count = (uint32_t)(TES_SEGMENT_SIZE >> shift);
  size_t size = seg->size;
  size_t page_size = (size_t)1 << shift;
  size_t old_purged = seg->purged_bytes;
  size_t old_dirty_end = seg->dirty_end;
  /* Page descriptors are set up when their page is first handed out
   * (desc_setup). Beyond the first OS page, a segment that was never
   * written there (fresh, or purged to zero) reads as zero already, and
   * stays untouched: a thread that uses a few pages touches one page of
   * header, not four (1,000 idle threads held 12 KiB each more). */
  size_t header = SEGMENT_HEADER(count);
  memset(seg, 0, zero && header > tes_os_page_size() ? tes_os_page_size() : header);
  seg->size = size;
  seg->page_shift = shift;
  seg->kind = kind;
  seg->page_count = count;
  seg->free_mask = (count == 64 ? ~(uint64_t)0 : (((uint64_t)1 << count) - 1)) & ~(uint64_t)1;
  seg->cookie = (uintptr_t)seg ^ tes_process_key;
  seg->dirty_end = size; /* pages will be written */
  /* Page memory state: a purged page is recommitted when it is used again;
   * anything else purged before (the header) is committed again now. */
  seg->lazy_zero = zero;
  seg->lazy_purged = purged;
  seg->desc_ready = 1; /* pages[0], the header's page, is never handed out */
  seg->purged_bytes = purged ? (size_t)(count - 1) * page_size : 0;
  tes_os_commit_note((int64_t)old_purged - (int64_t)seg->purged_bytes);
  atomic_store_explicit(&seg->thread_id, heap->thread_id, memory_order_relaxed);
  tes_segment_link(heap, seg);
  tes_lock(&segments_lock_);
  seg->all_prev = NULL;
  seg->all_next = tes_segments_all;
  if (tes_segments_all) tes_segments_all->all_prev = seg;
  tes_segments_all = seg;
  seg->in_all_list = true;
  tes_unlock(&segments_lock_);
  tes_segmap_set(seg, true);
  if (!zero && !purged) schedule_dirty_pages(heap, seg, old_dirty_end);
  else tes_heap_purge_for_growth(heap, TES_SEGMENT_SIZE, false);
  return seg;
}

tes_segment_t *tes_segment_alloc(tes_heap_t *heap, tes_segment_kind_t kind) {
  tes_segment_t *seg = tes_segment_obtain(TES_SEGMENT_SIZE, TES_SEGMENT_SIZE);
  return seg != NULL ? segment_setup(heap, kind, seg) : NULL;
}

/* A small or medium segment the cache holds still resident (not purged),
 * among its newest few, or NULL. A unit a large block left is kept for
 * the next large block, which takes one of exactly its size first
 * (tes_cache_take); purged ones go back as the cache's oldest. The scan
 * reads a header a slot, so it stops after a few: it runs at a page take
 * that would fault, not on every malloc. */
#define RESIDENT_LOOK_SLOTS 8
static tes_segment_t *cache_take_resident(void) {
  if (__atomic_load_n(&cache_count, __ATOMIC_RELAXED) == 0) return NULL;
  tes_segment_t *found = NULL;
  tes_lock(&cache_lock);
  for (size_t i = cache_count, n = 0; i-- > 0 && n < RESIDENT_LOOK_SLOTS; n++) {
    const tes_segment_t *seg = cache_slots[i].seg;
    if (cache_slots[i].size == TES_SEGMENT_SIZE && seg->kind != TES_SEG_LARGE && !seg->cache_purged &&
        seg->dirty_end > tes_os_page_size()) {
      found = cache_remove_locked(i);
      break;
    }
  }
  tes_unlock(&cache_lock);
  return found;
}

void tes_segment_free(tes_segment_t *seg) {
  atomic_store_explicit(&seg->thread_id, TES_TID_SHARED, memory_order_relaxed);
  seg->heap = NULL;
  if (seg->in_all_list) {
    tes_lock(&segments_lock_);
    if (seg->all_prev) seg->all_prev->all_next = seg->all_next;
    else tes_segments_all = seg->all_next;
    if (seg->all_next) seg->all_next->all_prev = seg->all_prev;
    seg->all_next = seg->all_prev = NULL;
    seg->in_all_list = false;
    /* Every small/medium segment is on the list (large ones never are). */
    released_ring[released_next++ & (RELEASED_RING - 1)] =
        (struct released_s){(uintptr_t)seg + ((size_t)1 << seg->page_shift), (uintptr_t)seg + seg->size};
    tes_unlock(&segments_lock_);
  }
  tes_cache_put(seg);
}

bool tes_segment_released_before(const void *p) {
  uintptr_t a = (uintptr_t)p;
  bool found = false;
  tes_lock(&segments_lock_);
  for (unsigned i = 0; i < RELEASED_RING && !found; i++)
    found = a >= released_ring[i].first && a < released_ring[i].end;
  tes_unlock(&segments_lock_);
  return found;
}

void tes_segments_lock(void) { tes_lock(&segments_lock_); }
void tes_segments_unlock(bool child) {
  if (child) tes_lock_reset(&segments_lock_);
  else tes_unlock(&segments_lock_);
}

/* A page's descriptor, before its page is first handed out: it reads as
 * zero (tes_segment_alloc zeroed the header, or found it zero past its
 * first OS page), and needs its position and the memory state the segment
 * came with. */
static void desc_setup(tes_segment_t *seg, unsigned index) {
  tes_page_t *page = &seg->pages[index];
  if (seg->desc_ready & ((uint64_t)1 << index)) return;
  page->index = (uint8_t)index;
  page->mem_zero = seg->lazy_zero;
  page->purged = seg->lazy_purged;
  /* A descriptor always names a bin: tes_heap_visit (any thread) reads
   * page->bin->head of every page it sees in use (same cache line as the
   * fields above: no extra touch). */
  tes_page_set_bin(page, &tes_bin_closed);
  seg->desc_ready |= (uint64_t)1 << index;
}

tes_page_t *tes_segment_page_alloc(tes_heap_t *heap, tes_segment_kind_t kind) {
  tes_segment_t *seg = heap->free_segments[kind];
  if (seg == NULL) {
    seg = tes_segment_alloc(heap, kind);
    if (seg == NULL) return NULL;
  } else if ((seg->free_mask & seg->dirty_mask) == 0) {
    /* No free page of the segment is resident: the page would be faulted
     * in afresh while a segment of the other heaps' or kind's, freed whole,
     * may wait in the cache still resident until its purge. That one is
     * taken instead, whatever kind it held (its dirty pages wait on this
     * heap's purge list, schedule_dirty_pages, and are taken first): a
     * program that went from small blocks to medium ones and back faulted
     * its purged small pages in again beside the medium segments in the
     * cache (lib.api_phase_rss, its third phase: 64.8 MiB grown, now 39), and threads
     * that come and go (mstress: peak RSS 0.83-0.92 of before). */
    tes_segment_t *cached = cache_take_resident();
    if (cached != NULL) seg = segment_setup(heap, kind, cached);
  }
  /* Prefer a page retired recently and not purged yet: reusing it costs no
   * page faults (and cancels its purge). */
  uint64_t candidates = seg->free_mask & seg->dirty_mask;
  unsigned idx = (unsigned)__builtin_ctzll(candidates ? candidates : seg->free_mask);
  seg->free_mask &= ~((uint64_t)1 << idx);
  seg->dirty_mask &= ~((uint64_t)1 << idx);
  seg->used_pages++;
  if (seg->free_mask == 0) {
    if (seg->free_prev) seg->free_prev->free_next = seg->free_next;
    else heap->free_segments[kind] = seg->free_next;
    if (seg->free_next) seg->free_next->free_prev = seg->free_prev;
    seg->free_next = seg->free_prev = NULL;
    seg->in_free_list = false;
  }
  desc_setup(seg, idx);
  tes_page_t *page = &seg->pages[idx];
  tes_heap_purge_cancel(heap, page);
  page_slices_set(heap, seg, idx, true);
  return page;
}

void tes_segment_page_bin(tes_heap_t *heap, tes_page_t *page, tes_bin_t *bin) {
  tes_page_set_bin(page, bin);
#if !TES_SECURE
  page_slices_set(heap, tes_segment_of(page), page->index, true);
#else
  (void)heap;
#endif
}

void tes_segment_page_free(tes_heap_t *heap, tes_page_t *page) {
  tes_segment_t *seg = tes_segment_of(page);
  /* Its last block may have come back through the delayed list from a
   * remote freer still about to store to the page's word: the page, and the
   * segment it may release, wait for that store (every retire comes here). */
  tes_page_settle_freeing(page);
  /* A kept page purged in place (tes_segment_purge_kept) retires clean:
   * not dirty, no purge to schedule. */
  bool purged = page->purged;
  tes_page_in_use_set(page, 0);
  if (!purged) page->mem_zero = 0;
#if TES_SECURE
  page->retired_capacity = page->capacity; /* its statistics are folded: what it carved, for retired_bytes */
  tes_page_capacity_set(page, 0); /* no block of it passes tes_secure_free_quick's capacity test */
#endif
  page_slices_set(heap, seg, page->index, false); /* a stray free of its blocks takes the slow path */
  tes_page_set_bin(page, &tes_bin_closed);
  seg->free_mask |= (uint64_t)1 << page->index;
  if (!purged) seg->dirty_mask |= (uint64_t)1 << page->index;
  seg->used_pages--;
  if (seg->used_pages == 0) {
    for (uint32_t i = 1; i < seg->page_count; i++) tes_heap_purge_cancel(heap, &seg->pages[i]);
    tes_segment_unlink(heap, seg);
    tes_segment_free(seg);
    return;
  }
  if (!seg->in_free_list) {
    seg->free_prev = NULL;
    seg->free_next = heap->free_segments[seg->kind];
    if (seg->free_next) seg->free_next->free_prev = seg;
    heap->free_segments[seg->kind] = seg;
    seg->in_free_list = true;
  }
  if (!purged) tes_heap_purge_schedule(heap, page);
}

/* A kept page of an idle heap gives its memory back while it stays in use
 * (heap.c, kept_purge_locked, which emptied its lists first: nothing of it
 * is read again before its owner carves it afresh, tes_page_init). The
 * heap's purge_lock is held. */
void tes_segment_purge_kept(tes_page_t *page) {
  tes_segment_t *seg = tes_segment_of(page);
  size_t page_size = (size_t)1 << seg->page_shift;
  bool zero = tes_os_purge((uint8_t *)seg + (size_t)page->index * page_size, page_size,
                           tes_opt(TES_OPTION_PURGE_DECOMMIT) != 0);
  page->purged = 1;
  page->mem_zero = zero;
  seg->purged_bytes += page_size;
  tes_os_commit_note(-(int64_t)page_size);
}

/* Purge `count` neighbouring pages from `first` on, in one call to the OS
 * (pages retired or scheduled together lie side by side: one madvise for a
 * run, not one a page). Pages in use or purged already are left out. */
void tes_segment_purge_pages(tes_page_t *first, unsigned count) {
  tes_segment_t *seg = tes_segment_of(first);
  size_t page_size = (size_t)1 << seg->page_shift;
  unsigned end = first->index + count;
  for (unsigned i = first->index; i < end;) {
    tes_page_t *page = &seg->pages[i];
    if (page->purged || page->in_use) {
      i++;
      continue;
    }
    unsigned run = 1;
    while (i + run < end && !seg->pages[i + run].purged && !seg->pages[i + run].in_use) run++;
    uint8_t *start = (uint8_t *)seg + (size_t)i * page_size;
    bool zero = tes_os_purge(start, run * page_size, tes_opt(TES_OPTION_PURGE_DECOMMIT) != 0);
    for (unsigned j = i; j < i + run; j++) {
      seg->pages[j].purged = 1;
      seg->pages[j].mem_zero = zero;
      seg->dirty_mask &= ~((uint64_t)1 << j);
    }
    seg->purged_bytes += run * page_size;
    tes_os_commit_note(-(int64_t)(run * page_size));
    i += run;
  }
}

/* ---- abandoned segments ------------------------------------------------------- */
void tes_abandoned_lock(void) { tes_lock(&abandoned_lock_); }
void tes_abandoned_unlock(void) { tes_unlock(&abandoned_lock_); }

void tes_abandoned_push(tes_segment_t *seg) {
  tes_lock(&abandoned_lock_);
  seg->prev = NULL;
  seg->next = tes_abandoned_list;
  if (tes_abandoned_list) tes_abandoned_list->prev = seg;
  else abandoned_tail = seg;
  tes_abandoned_list = seg;
  atomic_fetch_add(&abandoned_count, 1);
  tes_unlock(&abandoned_lock_);
}

/* The oldest first: its owner exited longest ago, so other threads have had
 * the longest to free its blocks, and adopting it gives back the most. (The
 * newest first let each new thread take what the last one left while older
 * segments sank out of reach, mapped and resident, under thread churn with
 * hand-offs: 1.2 GiB more address space per 1,000 threads.) */
tes_segment_t *tes_abandoned_pop(void) {
  if (atomic_load_explicit(&abandoned_count, memory_order_relaxed) == 0) return NULL;
  tes_lock(&abandoned_lock_);
  tes_segment_t *seg = abandoned_tail;
  if (seg) {
    abandoned_tail = seg->prev;
    if (abandoned_tail) abandoned_tail->next = NULL;
    else tes_abandoned_list = NULL;
    seg->next = seg->prev = NULL;
    atomic_fetch_sub(&abandoned_count, 1);
  }
  tes_unlock(&abandoned_lock_);
  return seg;
}

size_t tes_abandoned_count(void) { return atomic_load(&abandoned_count); }

#ifdef TES_FAULT_INJECTION
bool tes_segment_locks_mine(void) {
  return tes_lock_mine(&cache_lock) || tes_lock_mine(&segments_lock_) || tes_lock_mine(&abandoned_lock_);
}
#endif

/* ---- fork ------------------------------------------------------------------------ */
TES_COLD void tes_segment_locks_acquire(void) {
  cache_lock_take();
  tes_lock(&abandoned_lock_);
}
TES_COLD void tes_segment_locks_release(bool child) {
  if (child) {
    /* Segments another thread had out for its purge stay mapped, and out
     * of the cache: a forced purge must not wait for a thread not here. */
    cache_out = 0;
    tes_lock_reset(&abandoned_lock_);
    tes_lock_reset(&cache_lock);
  } else {
    tes_unlock(&abandoned_lock_);
    tes_unlock(&cache_lock);
  }
}
