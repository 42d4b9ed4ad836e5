/* alloc.c — the tes_* allocation API: malloc/calloc/realloc/aligned/usable
 * size/free, built on the inline fast paths (alloc_inline.h) and the heap
 * slow path. Standard semantics to the letter: malloc(0) returns a unique
 * block; calloc/reallocarray detect overflow (ENOMEM); a bad alignment is
 * EINVAL; realloc(p, 0) frees p and returns NULL (glibc's behaviour);
 * realloc stays in place while the block's class (or a large block's
 * segment) still fits. In the drop-in shared libraries the standard names
 * are these functions under a second name (aliases, at the end of this
 * file); in the static archives override.c defines them. */
#include "alloc_inline.h"

static tes_heap_t *heap_for_slow_path(void) {
  tes_heap_t *heap = tes_tls_heap;
  if (tes_unlikely(heap->is_static)) {
    heap = tes_thread_heap_init();
    if (heap == NULL) heap = &tes_heap_empty;
  }
  return heap;
}

static tes_counters_t *counters_of(tes_heap_t *heap) {
  return heap->is_static ? &tes_orphan_counters : &heap->counters;
}

TES_API void *tes_malloc(size_t size) { return tes_malloc_inline(tes_tls_heap, size); }

TES_API void tes_free(void *p) { tes_free_inline(p); }

/* The sizes are hints free does not need, so the sized frees are tes_free
 * itself under other names (an alias: one copy of the fast path, not three,
 * and no extra jump). Their extra arguments arrive in registers tes_free
 * never reads (the x86-64 and AArch64 calling conventions), which is what
 * makes the alias across the two types sound here. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattribute-alias"
#endif
TES_API void tes_free_sized(void *p, size_t size) __attribute__((alias("tes_free")));
TES_API void tes_free_aligned_sized(void *p, size_t alignment, size_t size) __attribute__((alias("tes_free")));
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void *tes_calloc_in(tes_heap_t *heap, size_t count, size_t size);
void *tes_calloc_in(tes_heap_t *heap, size_t count, size_t size) {
  size_t total;
  if (tes_unlikely(__builtin_mul_overflow(count, size, &total))) {
    counters_of(heap)->calloc_calls++;
    counters_of(heap)->failed_calls++;
    errno = ENOMEM;
    return NULL;
  }
  if (tes_likely(total <= TES_DIRECT_MAX - TES_PADDING)) {
    tes_page_t *page = heap->direct[(total + TES_PADDING + 15) >> 4];
    tes_block_t *block = page->free;
    if (tes_likely(block != NULL)) {
      page->free = tes_block_next_checked(page, block);
      page->used++;
      heap->counters.calloc_calls++;
      heap->counters.other_allocs++;
      if (page->free_is_zero) tes_block_link_slot_in(page, block, TES_KIND_SMALL)->next = NULL;
      else memset(block, 0, total);
#if TES_SECURE
      tes_secure_arm(page, block, total, true); /* after the zeroing: the canary follows the zeroed bytes */
#endif
      return block;
    }
  }
  void *p = tes_heap_malloc_generic(heap, total, true);
  if (heap->is_static) heap = tes_tls_heap; /* the slow path may have given us one */
  tes_counters_t *c = counters_of(heap);
  c->calloc_calls++;
  if (p) c->other_allocs++;
  return p; /* a failure was counted where it happened */
}

TES_API void *tes_calloc(size_t count, size_t size) { return tes_calloc_in(tes_tls_heap, count, size); }

TES_API size_t tes_usable_size(const void *p) { return tes_usable_size_inline(p); }

size_t tes_usable_size_slow(const void *p) {
  if (p == NULL) return 0;
  tes_segment_t *seg = tes_owned_segment(p, false);
  if (seg == NULL) return 0;
  if (seg->kind == TES_SEG_LARGE) {
#if TES_SECURE
    return tes_secure_requested(&seg->pages[0], p);
#else
    return tes_large_usable(seg);
#endif
  }
#if TES_SECURE
  return tes_secure_requested(tes_page_of(seg, p), p);
#else
  return tes_page_of(seg, p)->block_size;
#endif
}

/* The end of a realloc that moves: q is the new block (NULL when the
 * allocation failed, which the core has counted; p is then left alone), the
 * first min(old_usable, size) bytes go over and p is freed. */
static void *realloc_moved(tes_counters_t *counters, void *p, size_t old_usable, void *q, size_t size) {
  if (q == NULL) return NULL;
  memcpy(q, p, old_usable < size ? old_usable : size);
  counters->other_allocs++;
  counters->other_frees++;
  tes_free_inline(p);
  return q;
}

/* realloc of p, a live block of the small/medium `page` holding `old` bytes
 * (its usable size), to `size`. In place while the block's class still
 * fits and is not twice too big (the hardened build re-arms its padding for
 * the new size). Growing out of the block asks for at least a quarter more,
 * as tcmalloc does: above 256 B that is the next class anyway, but below,
 * classes are 16 B apart and a buffer appended to a few bytes at a time
 * moved on nearly every call (realloc workload: about 6% of its time; in
 * the hardened build it doubled the bytes copied). The new block's usable
 * size stays the size asked in the hardened build (tes_secure_rearm). */
static TES_NOINLINE void *realloc_small_move(tes_heap_t *heap, tes_counters_t *counters, size_t room, void *p,
                                             size_t old, size_t size) {
  size_t want = size;
  if (size > room && size - room < room / 4) want = room + room / 4;
#if TES_SECURE
  /* Out of the medium classes: straight to a large block with room to grow
   * (as a large block that must move goes, tes_realloc_in), not to one at
   * the end of its segment, against that segment's guard page, which the
   * next realloc then grew by mremap: fresh pages in every round of a
   * program that grows its arrays anew (CPython's lists: 4,000 page faults
   * more than the default build in bench_python; security.*_list_grow_faults,
   * twenty-fifth session, hsm25). */
  if (want > TES_MEDIUM_BLOCK_MAX - TES_PADDING)
    return realloc_moved(counters, p, old, tes_large_alloc_growable(heap, size), size);
#endif
  void *q = tes_malloc_inline(heap, want);
#if TES_SECURE
  if (q != NULL && want != size) tes_secure_rearm(q, size);
#endif
  return realloc_moved(counters, p, old, q, size);
}

TES_INLINE void *realloc_small(tes_heap_t *heap, tes_counters_t *counters, tes_page_t *page, void *p, size_t old,
                               size_t size) {
  size_t room = page->block_size - TES_PADDING; /* the hardened build's canary and size word: 0 here else */
  if (tes_likely(size <= room && size + TES_PADDING >= page->block_size / 2)) {
#if TES_SECURE
    tes_secure_arm(page, p, size, false);
#endif
    counters->realloc_in_place++;
    return p;
  }
  return realloc_small_move(heap, counters, room, p, old, size);
}

void *tes_realloc_in(tes_heap_t *heap, void *p, size_t size);
void *tes_realloc_in(tes_heap_t *heap, void *p, size_t size) {
  if (heap->is_static) heap = heap_for_slow_path();
  tes_counters_t *counters = counters_of(heap);
  if (p == NULL) {
    void *q = tes_malloc_inline(heap, size);
    counters_of(tes_tls_heap)->realloc_calls++;
    if (q) counters_of(tes_tls_heap)->other_allocs++;
    return q;
  }
  counters->realloc_calls++;
  if (size == 0) {
    counters->other_frees++;
    tes_free_inline(p);
    return NULL;
  }
  {
    /* A block of this thread's own small/medium pages: the free fast path's
     * slice table names its page without the segment-map walk (a growing
     * buffer is realloc'ed in place many times per move). The hardened build
     * takes it only for a carved, live block with its canary intact; the
     * checked path below judges and reports anything else. */
    tes_slices_t *slices = tes_tls_slices;
    size_t slot;
    if (tes_likely(tes_slice_hit(slices, p, &slot))) {
      tes_page_t *page = slices->entry[slot].page;
#if TES_SECURE
      uint32_t requested;
      if (tes_likely(tes_secure_recorded_size(page, p, TES_KIND_ANY, &requested) && tes_secure_canary_ok(page, p, requested)))
        return realloc_small(heap, counters, page, p, requested, size);
#else
      return realloc_small(heap, counters, page, p, page->block_size, size);
#endif
    }
  }
  tes_segment_t *seg = tes_owned_segment(p, true);
  if (seg == NULL) {
    counters->failed_calls++;
    errno = EINVAL;
    return NULL;
  }
  if (seg->kind != TES_SEG_LARGE) {
    tes_page_t *page = tes_page_of(seg, p);
#if TES_SECURE
    /* Reported (an interior pointer has no size word to judge; a freed
     * block must not be copied and freed again); with
     * TESSERA_ABORT_ON_ERROR=0 the call fails and p is left alone. An
     * overflow is reported and the block still moves. */
    size_t index;
    bool block = tes_secure_block_index(page, p, &index) && index < tes_page_capacity_any_thread(page);
    if (!block) tes_report_error(TES_ERR_INVALID_FREE, p, page);
    if (!block || !tes_secure_check_padding(page, p)) {
      counters->failed_calls++;
      errno = EINVAL;
      return NULL;
    }
    return realloc_small(heap, counters, page, p, tes_secure_requested(page, p), size);
#else
    return realloc_small(heap, counters, page, p, page->block_size, size);
#endif
  }
#if TES_SECURE
  size_t old_usable = tes_secure_requested(&seg->pages[0], p);
#else
  size_t old_usable = tes_large_usable(seg); /* seg is p's: no second segment-map walk */
#endif
#if TES_SECURE
  /* Judge the old padding now, while it is where the old size says, and
   * re-arm it so that the free of a moved block does not report it twice. */
  tes_secure_check_padding(&seg->pages[0], p);
  tes_secure_set_padding(&seg->pages[0], p, old_usable);
#endif
  if (size > TES_MEDIUM_BLOCK_MAX) {
    size_t old_seg = seg->size;
    void *q = tes_large_realloc(seg, p, size); /* errno untouched, NULL or not */
    if (q != NULL) {
      /* Its segment may have moved with it (mremap): the block keeps its offset. */
      tes_segment_t *now = (tes_segment_t *)((uintptr_t)seg + ((uintptr_t)q - (uintptr_t)p));
      if (q != p || now->size != old_seg) counters->huge_remaps++;
      if (q == p) counters->realloc_in_place++;
#if TES_SECURE
      tes_secure_set_padding(&now->pages[0], q, size);
#endif
      return q;
    }
#if TES_SECURE
    /* Moving: to a block that can grow in place (see large.c), so that a
     * buffer grown step by step is copied O(log n) times, not every time. */
    void *moved = tes_large_alloc_growable(heap, size);
    if (moved != NULL) {
      memcpy(moved, p, old_usable < size ? old_usable : size);
      tes_large_discard(seg, p, old_usable); /* copied: its pages go back now, not after the cache's delay */
    }
    return realloc_moved(counters, p, 0, moved, size);
#endif
  }
  return realloc_moved(counters, p, old_usable, tes_malloc_inline(heap, size), size);
}

TES_API void *tes_realloc(void *p, size_t size) { return tes_realloc_in(tes_tls_heap, p, size); }

TES_API void *tes_reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return tes_realloc(p, total);
}

/* ---- aligned allocation ---------------------------------------------------------- */
static void *aligned_in(size_t alignment, size_t size) {
  tes_heap_t *heap = heap_for_slow_path();
  tes_counters_t *counters = counters_of(heap);
  counters->aligned_calls++;
  if (alignment > TES_MAX_ALIGNMENT || size > ((size_t)1 << 46)) {
    counters->failed_calls++;
    errno = ENOMEM;
    return NULL;
  }
  void *p;
  if (alignment <= 16) p = tes_malloc_inline(heap, size);
  else if (heap->is_static) p = NULL, errno = ENOMEM, counters->failed_calls++;
  else p = tes_heap_malloc_aligned(heap, size, alignment, false);
  if (p) counters->other_allocs++;
  return p; /* a failure was counted where it happened */
}

static bool is_power_of_two(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

TES_API void *tes_aligned_alloc(size_t alignment, size_t size) {
  if (!is_power_of_two(alignment)) {
    errno = EINVAL;
    return NULL;
  }
  return aligned_in(alignment, size);
}

TES_API int tes_posix_memalign(void **out, size_t alignment, size_t size) {
  if (!is_power_of_two(alignment) || alignment % sizeof(void *) != 0) return EINVAL;
  int saved = errno;
  void *p = aligned_in(alignment, size);
  if (p == NULL) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

TES_API void *tes_memalign(size_t alignment, size_t size) {
  /* As glibc: beyond SIZE_MAX / 2 + 1 no power of two is left to round up
   * to (EINVAL); anything below that rounds up, and an alignment beyond
   * TES_MAX_ALIGNMENT then fails in aligned_in with ENOMEM, as
   * aligned_alloc and posix_memalign do. */
  if (alignment > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return NULL;
  }
  /* glibc rounds a non-power-of-two alignment up to the next power of two. */
  if (!is_power_of_two(alignment)) {
    size_t a = 1;
    while (a < alignment) a <<= 1;
    alignment = a;
  }
  return aligned_in(alignment, size);
}

TES_API void *tes_valloc(size_t size) { return aligned_in(tes_os_page_size(), size); }

TES_API void *tes_pvalloc(size_t size) {
  size_t page = tes_os_page_size();
  if (size > SIZE_MAX - page) {
    errno = ENOMEM;
    return NULL;
  }
  size = size == 0 ? page : (size + page - 1) & ~(page - 1);
  return aligned_in(page, size);
}

/* ---- returning memory --------------------------------------------------------------- */
TES_API void tes_collect(bool force) {
  if (tes_visit_defer_collect(force)) return; /* from a tes_heap_visit visitor: at the walk's end */
  tes_reap_late_heaps();
  tes_heap_t *heap = tes_tls_heap;
  /* Heaps of exited threads kept for new threads (tes_heap_park) go to the
   * abandoned list first, so that what they hold is collected and purged. */
  if (force) tes_heap_abandon_parked(INT64_MAX, UINT32_MAX);
  /* A forced collect must also reach what exited threads left behind, even
   * from a thread that never allocated: it needs a heap to adopt into. */
  if (heap->is_static && force && tes_abandoned_count() > 0) heap = heap_for_slow_path();
  if (!heap->is_static) {
    if (force) {
      /* Take over what exited threads left: adopting frees their empty pages. */
      tes_segment_t *seg;
      while ((seg = tes_abandoned_pop()) != NULL) {
        tes_heap_adopt_segment(heap, seg);
        tes_stats_heap_reclaimed();
      }
    }
    tes_heap_process_deletes(heap); /* heaps other threads deleted */
    tes_heap_collect(heap, force);
    if (heap->is_default) tes_heap_collect_first_class(heap, force);
  }
  /* Other threads' retired pages too: a thread that is alive but idle would
   * otherwise keep them until its own next slow path. (Their bins and
   * remote-free stacks stay: only their owners touch those.) */
  tes_heaps_purge(tes_os_clock_ms(), force);
  tes_cache_purge(force);
}

/* ---- the standard names (drop-in shared libraries) ---------------------------------- */
/* In libtessera.so and libtessera-secure.so (TES_STANDARD_ALIASES, set by
 * src/CMakeLists.txt for the shared drop-in builds) the standard C names,
 * glibc's internal __libc_* ones and override_new.cpp's tes_cxx_malloc and
 * tes_cxx_free are aliases of the tes_* functions above: the program
 * reaches the inlined fast paths with no extra call or PLT hop, and the
 * library holds one copy of each. (Until the twenty-seventh session
 * override.c defined them as functions of their own there too: three
 * copies of malloc's fast path and seven of free's, 2 KiB of the
 * executable segment, which every process maps whole, and the forwarders
 * jumped through the PLT to reach tes_aligned_alloc and the rest:
 * PERFORMANCE.md, txt27.) The static archives still take them from
 * override.c, an object of their own: an alias would come with every
 * program that calls tes_malloc and hand that program's C library, whose
 * internal mallocs go through the executable's malloc, to the allocator
 * (lib.unit_page_exit counts every block). */
#if TES_OVERRIDE && TES_STANDARD_ALIASES
#define TES_STANDARD_NAME(target) __attribute__((alias(#target), visibility("default")))
void *malloc(size_t size) TES_STANDARD_NAME(tes_malloc);
void free(void *p) TES_STANDARD_NAME(tes_free);
void cfree(void *p) TES_STANDARD_NAME(tes_free);
void free_sized(void *p, size_t size) TES_STANDARD_NAME(tes_free_sized);
void free_aligned_sized(void *p, size_t alignment, size_t size) TES_STANDARD_NAME(tes_free_aligned_sized);
void *calloc(size_t count, size_t size) TES_STANDARD_NAME(tes_calloc);
void *realloc(void *p, size_t size) TES_STANDARD_NAME(tes_realloc);
void *reallocarray(void *p, size_t count, size_t size) TES_STANDARD_NAME(tes_reallocarray);
void *aligned_alloc(size_t alignment, size_t size) TES_STANDARD_NAME(tes_aligned_alloc);
int posix_memalign(void **out, size_t alignment, size_t size) TES_STANDARD_NAME(tes_posix_memalign);
void *memalign(size_t alignment, size_t size) TES_STANDARD_NAME(tes_memalign);
void *valloc(size_t size) TES_STANDARD_NAME(tes_valloc);
void *pvalloc(size_t size) TES_STANDARD_NAME(tes_pvalloc);
size_t malloc_usable_size(void *p) TES_STANDARD_NAME(tes_usable_size);

/* glibc's internal names. */
void *__libc_malloc(size_t size) TES_STANDARD_NAME(tes_malloc);
void __libc_free(void *p) TES_STANDARD_NAME(tes_free);
void *__libc_calloc(size_t count, size_t size) TES_STANDARD_NAME(tes_calloc);
void *__libc_realloc(void *p, size_t size) TES_STANDARD_NAME(tes_realloc);
void *__libc_memalign(size_t alignment, size_t size) TES_STANDARD_NAME(tes_memalign);
void *__libc_valloc(size_t size) TES_STANDARD_NAME(tes_valloc);
void *__libc_pvalloc(size_t size) TES_STANDARD_NAME(tes_pvalloc);
void *__libc_reallocarray(void *p, size_t count, size_t size) TES_STANDARD_NAME(tes_reallocarray);

/* For override_new.cpp's operator new and delete: hidden, so its calls bind
 * here directly (no PLT hop, and a program's own malloc does not capture
 * them). */
void *tes_cxx_malloc(size_t size) __attribute__((alias("tes_malloc")));
void tes_cxx_free(void *p) __attribute__((alias("tes_free")));
#endif /* TES_OVERRIDE && TES_STANDARD_ALIASES */

/* override_new.cpp's aligned new, in every drop-in build: hidden, no PLT
 * hop (it called tes_aligned_alloc through the PLT until the
 * twenty-seventh session). Not a standard name, so a static program gets
 * nothing it did not ask for. */
#if TES_OVERRIDE
void *tes_cxx_aligned_alloc(size_t alignment, size_t size) __attribute__((alias("tes_aligned_alloc")));
#endif
