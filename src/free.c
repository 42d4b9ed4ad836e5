/* free.c — everything after the inline free fast path: frees of blocks other
 * threads own (lock-free hand-off), large blocks, pointers we do not own, the
 * page events the fast path defers ("--used == 0"), and error reports.
 *
 * Remote free protocol (page->xthread_free, tagged with TES_TF_*):
 *   NORMAL       push the block onto the page's stack (CAS); the owner
 *                collects it when the page's free list runs dry.
 *   USE_DELAYED  the page sits in its owner's full queue, where nobody would
 *                look: the first remote freer flips the tag to FREEING, pushes
 *                the block onto page->heap->delayed_free, then sets NORMAL.
 *                The owner drains delayed_free on its next slow path, which
 *                moves the page back to its class queue.
 *   FREEING      transient; the owner waits for it to clear before it changes
 *                the page's heap (abandon/delete), so page->heap stays valid
 *                while a remote thread uses it, and before it gives the
 *                page back (tes_segment_page_free): the block pushed may be
 *                the page's last, and the freer's last store goes into the
 *                page's descriptor (race27).
 * The hardened build sets a bit a block instead of pushing (NORMAL; its
 * tes_free_remote below). No locks; the only atomics are the CASes (and,
 * hardened, the bit) on remote frees. */
#include "alloc_inline.h"

#include <stdarg.h>
#include <stdio.h>
#ifdef TES_FAULT_INJECTION
#include "fault.h"
void (*volatile tes_fault_remote_gap)(void);
void (*volatile tes_fault_delayed_gap)(void);
#endif

TES_BIG_BSS tes_counters_t tes_orphan_counters;

/* Counters of the calling thread's heap; a thread past its exit counts into
 * the shared orphan set (atomically: several exiting threads may race). */
static void count_free(bool large) {
  tes_heap_t *heap = tes_tls_heap;
  if (!heap->is_static) {
    if (large) heap->counters.large_frees++;
    else heap->counters.remote_frees++;
  } else {
    __atomic_fetch_add(large ? &tes_orphan_counters.large_frees : &tes_orphan_counters.remote_frees, 1,
                       __ATOMIC_RELAXED);
  }
}

void tes_free_local_block(tes_page_t *page, tes_block_t *block) { tes_page_push_local(page, block); }

void tes_report_double_free(const tes_page_t *page, const void *p) { tes_report_error(TES_ERR_DOUBLE_FREE, p, page); }

#if !TES_SECURE
void tes_free_owned_checked(tes_page_t *page, tes_bin_t *bin, tes_block_t *block) {
  /* At most `held` steps, and none past a block without the mark (handed
   * out already, its link is data: TES_BIN_POP_OR_RETURN reports it): a
   * list already damaged cannot keep us here or lead us astray. */
  uint32_t held = tes_bin_held(bin);
  tes_block_t *b = bin->head;
  for (uint32_t i = 0; i < held && *tes_bin_mark(b) == (uintptr_t)bin; i++, b = b->next) { /* the end has no bin's mark */
    if (b == block) {
      tes_report_double_free(page, block);
      return; /* when the program goes on (TESSERA_ABORT_ON_ERROR=0): not linked twice */
    }
  }
  *tes_bin_mark(block) = 0; /* the program's own data, not a mark */
  tes_free_owned(page, block);
}
#endif

void tes_page_free_event(tes_page_t *page) {
  tes_heap_t *heap = atomic_load_explicit(&page->heap, memory_order_relaxed);
  if (page->in_full) tes_heap_page_unfull(heap, page);
  else tes_heap_page_emptied(heap, page);
}

/* A remote free into a full page (its word USE_DELAYED, set to FREEING by
 * the caller): the block goes onto the owner heap's delayed list, then the
 * word to NORMAL, which ends the wait of an owner changing the page's state
 * (tes_page_set_delayed yields while it reads FREEING) or giving the page
 * back (tes_page_settle_freeing): once the push is visible the owner may
 * free the block and empty the page, so the page's descriptor stays valid
 * for the last store only through that wait. */
static inline void delayed_push(tes_page_t *page, tes_block_t *block) {
  tes_heap_t *heap = atomic_load_explicit(&page->heap, memory_order_acquire);
  tes_block_t *head = atomic_load_explicit(&heap->delayed_free, memory_order_relaxed);
  do {
    block->next = tes_delayed_encode(heap, head);
  } while (!atomic_compare_exchange_weak_explicit(&heap->delayed_free, &head, block, memory_order_release,
                                                  memory_order_relaxed));
#ifdef TES_FAULT_INJECTION
  if (tes_fault_delayed_gap != NULL) tes_fault_delayed_gap();
#endif
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, (tf & ~TES_TF_MASK) | TES_TF_NORMAL,
                                                memory_order_release, memory_order_relaxed)) {
  }
}

#if TES_SECURE
/* The hardened remote free (RELIABILITY.md, twenty-fifth session, hrem25):
 * the block's link becomes an encoded NULL (the collect's check of a write
 * after free), the word's summary bit for its bitmap words is set (a CAS,
 * only when it is not set already: most frees between two collects find
 * it set), then the block's bit, last: the free's one locked instruction
 * as a rule, and its last touch of the page (the page cannot empty before
 * it: `used` counts the block until the owner takes the bit). No link to
 * the previous block, so the collect has no chain of misses to follow. A
 * bit set after the owner took its summary bit waits for the next free
 * into those words, or for a collect of every word (tes_page_take_if_empty,
 * thread exit), counted in `used` meanwhile. A full page's (USE_DELAYED)
 * free goes through the heap's delayed list as before, without a bit. */
void tes_free_remote(tes_page_t *page, tes_block_t *block) {
  size_t index;
  (void)tes_secure_block_index(page, block, &index); /* a carved block start: the caller checked */
  uintptr_t summary = tes_tf_summary_bit(index / 64);
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
  for (;;) {
    if ((tf & TES_TF_MASK) == TES_TF_USE_DELAYED) {
      if (atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, (tf & ~TES_TF_MASK) | TES_TF_FREEING,
                                                memory_order_acq_rel, memory_order_relaxed))
        break;
      continue;
    }
    if ((tf & summary) == 0 &&
        !atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, tf | summary, memory_order_relaxed,
                                               memory_order_relaxed))
      continue;
    tes_block_set_next(page, block, NULL);
    atomic_store_explicit(&page->remote_last, (uint32_t)index + 1, memory_order_relaxed);
#ifdef TES_FAULT_INJECTION
    if (tes_fault_remote_gap != NULL) tes_fault_remote_gap();
#endif
    uint64_t bit = (uint64_t)1 << (index % 64);
    if (tes_unlikely(atomic_fetch_or_explicit(tes_page_remote_bits(page) + index / 64, bit, memory_order_release) &
                     bit)) {
      /* Its bit is still set from an earlier free that the owner's free
       * raced (security.owner_remote_race): the block was freed twice then,
       * and the collect takes it once, by that bit. */
      tes_report_double_free(page, block);
    }
    return;
  }
  delayed_push(page, block);
}
#else
void tes_free_remote(tes_page_t *page, tes_block_t *block) {
#if !TES_SECURE
  /* A block its owner freed into its bin, freed again here: the owner
   * would hand it out from both its bin and its page (it was, silently).
   * The owner's bin cannot be searched from here, but a block carries its
   * bin's mark only while it is in the bin (a pop, a flush, and the
   * owner's own check clear it; so does tes_heap_free_all); a live block
   * passed to this thread has the program's data there. So does a block
   * on its owner's delayed list (tes_delayed_mark): freed again, it went
   * onto the page's stack over its delayed link, and the owner's walk of
   * the delayed list followed the stack's link (SIGSEGV). */
  uintptr_t mark = *tes_bin_mark(block);
  if (tes_unlikely(mark == (uintptr_t)atomic_load_explicit(&page->bin_for_remote, memory_order_relaxed) ||
                   mark == tes_delayed_mark(page))) {
    tes_report_double_free(page, block);
    return; /* when the program goes on: not linked twice */
  }
#endif
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_relaxed);
  uintptr_t want;
  bool delayed;
  do {
    delayed = (tf & TES_TF_MASK) == TES_TF_USE_DELAYED;
    if (delayed) {
      want = (tf & ~TES_TF_MASK) | TES_TF_FREEING;
    } else {
#if !TES_SECURE
      /* A block freed twice in a row by other threads is the head of the
       * stack (loaded anyway): it became its own link, and the owner
       * handed it out again and again (4,012 times in 4,096 mallocs). The
       * hardened build's tag exchange (tes_secure_check_free) refused it
       * before this point. */
      if (tes_unlikely(block == tes_tf_list(tf))) {
        tes_report_double_free(page, block);
        return; /* when the program goes on: not linked twice */
      }
#endif
      tes_block_set_next(page, block, tes_tf_list(tf));
      want = (uintptr_t)block | ((tf & ~(TES_TF_LIST_MASK | TES_TF_MASK)) + TES_TF_COUNT_ONE) | (tf & TES_TF_MASK);
    }
  } while (!atomic_compare_exchange_weak_explicit(&page->xthread_free, &tf, want, memory_order_acq_rel,
                                                  memory_order_relaxed));
  if (!delayed) return;
#if !TES_SECURE
  *tes_bin_mark(block) = tes_delayed_mark(page);
#endif
  delayed_push(page, block);
}
#endif

/* A page in use whose block area p lies in (its segment found p's); the
 * page part of every ownership check below. */
static inline bool page_holds(const tes_page_t *page, const void *p) {
#if TES_SECURE
  return tes_page_in_use_any_thread(page) && (const uint8_t *)p >= page->area;
#else
  /* From the remote frees' line, not the owner's first (internal.h). */
  const uint8_t *area = atomic_load_explicit(&page->area_if_in_use, memory_order_relaxed);
  return area != NULL && (const uint8_t *)p >= area;
#endif
}

/* The segment owning p if p is a live block start we can free; else NULL
 * (after reporting, when `report`). Cheap checks only in the default build. */
tes_segment_t *tes_owned_segment(const void *p, bool report) {
  unsigned v = tes_segmap_get(p);
  tes_segment_t *seg = v == TES_UNIT_START ? tes_segment_of(p)
                      : v == TES_UNIT_HOST  ? tes_packed_segment_of(p)
                                            : tes_segment_find(p);
  if (seg == NULL) {
    if (report) tes_report_unowned(p);
    return NULL;
  }
  if (seg->kind == TES_SEG_LARGE) {
    if (!tes_large_owned_block(seg, p)) {
      if (report) tes_report_unowned(p);
      return NULL;
    }
    return seg;
  }
  tes_page_t *page = tes_page_of(seg, p);
  if (tes_segment_of(p) != seg || !page_holds(page, p)) {
    if (report) {
      if (tes_page_in_use_any_thread(page)) tes_report_error(TES_ERR_INVALID_FREE, p, page);
      else tes_report_unowned(p);
    }
    return NULL;
  }
  return seg;
}

/* Everything tes_free_slow does not settle itself: NULL, foreign pointers,
 * huge-segment tails, large blocks, other threads' blocks (and, in the
 * hardened build, every free that missed the slice table). */
static TES_NOINLINE void free_checked(void *p) {
  if (p == NULL) return;
  tes_segment_t *seg = tes_owned_segment(p, true);
  if (seg == NULL) return;
  if (seg->kind == TES_SEG_LARGE) {
#if TES_SECURE
    if (!tes_secure_check_free(seg, &seg->pages[0], p)) return; /* reported */
#endif
    if (tes_thread_unstarted()) tes_thread_heap_init_for_free();
    count_free(true);
    tes_large_free(seg);
    return;
  }
  tes_page_t *page = tes_page_of(seg, p);
#if TES_SECURE
  if (!tes_secure_check_free(seg, page, p)) return; /* reported */
#endif
  tes_heap_t *heap = tes_tls_heap;
  if (tes_unlikely(tes_thread_unstarted())) {
    /* A thread that only frees still gets a heap: its counters, and its
     * exit, are then accounted like any other thread's (not after its exit). */
    tes_heap_t *mine = tes_thread_heap_init_for_free();
    if (mine != NULL) heap = mine;
  }
  if (atomic_load_explicit(&seg->thread_id, memory_order_relaxed) == heap->thread_id) {
    /* Ours, but its slice lost its slot in the table to a collision (or
     * was never in it: a parked heap's pages after its adoption): put it
     * back, so the next frees into this page take the fast path again.
     * The default build searches the bin first (out of line: inlined,
     * the bin's free cost libtessera.so 85 bytes of text, past
     * lib.fixed_cost_sizes): a block the park kept in the bin (bin_park),
     * freed again by the thread that took the heap over, went onto the
     * page's list too, unreported, and that thread's exit then walked a
     * bin whose links were the page's (SIGSEGV in bin_park: review21,
     * lib.api_adopted_double_free). */
    tes_slice_set(heap, tes_slice_of(p), page);
#if !TES_SECURE
    tes_free_owned_checked(page, page->bin, (tes_block_t *)p);
#else
    tes_free_local_block(page, (tes_block_t *)p);
#endif
  } else {
    count_free(false);
    tes_free_remote(page, (tes_block_t *)p);
  }
}

/* The hardened build's checks of a free into a page of ours, or (remote)
 * of another thread's block: those of tes_secure_check_free, reporting
 * nothing (the segment's cookie, then the block test, the freed tag and
 * the canary; for another thread's block the tag goes in by an atomic
 * exchange, tes_secure_free_quick_any_thread); what fails goes to
 * free_checked, which repeats them and reports. None in the default
 * build. */
TES_INLINE bool secure_quick(const tes_segment_t *seg, tes_page_t *page, void *p, bool remote) {
#if TES_SECURE
  if (remote) return tes_secure_cookie_ok(seg) && tes_secure_free_quick_any_thread(page, p);
  return tes_secure_cookie_ok(seg) && tes_secure_free_quick(page, p);
#else
  (void)seg, (void)page, (void)p, (void)remote;
  return true;
#endif
}

/* The inline free missed the slice table. With more than 64 MiB of a
 * thread's blocks live, most frees of its own blocks land here because
 * their slices lost their slots to collisions (fit-large: 330 MB live, 90%
 * of the frees), so the common case is settled first with the checks
 * tes_owned_segment would make, in the same order, and without a call: the
 * segment map says a segment starts at the pointer's 4 MiB unit (nothing is
 * dereferenced before that), the segment is this thread's (so it is a small
 * or medium one: large and abandoned segments have TES_TID_SHARED, a thread
 * without a heap has TES_TID_NONE), and the page is in use. The hardened
 * build adds the checks of tes_secure_check_free (the segment's cookie, then
 * tes_secure_free_quick); whatever fails them goes to free_checked, which
 * repeats them and reports. Another thread's small or medium block is
 * settled here too, in both builds (the hardened one with
 * tes_secure_free_quick_any_thread); large blocks only in the default. */
void tes_free_slow(void *p) {
  if (p == NULL) return; /* free(NULL) is common (libc and C++ runtimes, "free(old); old = new"): settle it first */
  if (tes_likely(tes_segmap_get(p) == TES_UNIT_START)) {
    tes_segment_t *seg = tes_segment_of(p);
    tes_heap_t *heap = tes_tls_heap;
    if (tes_likely(atomic_load_explicit(&seg->thread_id, memory_order_relaxed) == heap->thread_id)) {
      tes_page_t *page = tes_page_of(seg, p);
      if (tes_likely(page_holds(page, p) && secure_quick(seg, page, p, false))) {
        /* Take the slot back, so the next frees into this page hit it. */
        tes_slice_set(heap, tes_slice_of(p), page);
        tes_free_owned(page, (tes_block_t *)p);
        return;
      }
    } else if (heap->is_static) {
      /* No heap yet (free_checked makes one) or past thread exit. */
    } else if (seg->kind == TES_SEG_LARGE) {
#if !TES_SECURE
      /* A large block (shared: any thread frees it): tes_owned_segment's
       * check, without repeating the segment-map lookup and without the two
       * calls (large_cycle_bench: a cycle took 920 instructions, 869 since).
       * The hardened build's large frees take free_checked. */
      if (tes_likely(tes_large_owned_block(seg, p))) {
        heap->counters.large_frees++;
        tes_large_free(seg);
        return;
      }
#endif
    } else {
      /* Another thread's block (or an exited thread's): the checks
       * free_checked makes through tes_owned_segment (and, hardened,
       * tes_secure_check_free), without repeating the segment-map lookup
       * and without the calls. Threads that free each other's blocks come
       * here on most frees (mstress: callgrind, 137 instructions a remote
       * free from tes_free_slow on, now 67; hardened: 195.4 through
       * free_checked before the twentieth session, 111.3 since,
       * security.remote_free_budget). */
      tes_page_t *page = tes_page_of(seg, p);
#if defined(__x86_64__) && !TES_SECURE
      /* The line page_holds reads and the CAS writes, asked for in the
       * exclusive state at once: read first, it came over shared and the
       * CAS had to ask again (tcm27). A no-op where unsupported. */
      __asm__ volatile("prefetchw %0" : : "m"(page->xthread_free));
#endif
      if (tes_likely(page_holds(page, p) && secure_quick(seg, page, p, true))) {
        heap->counters.remote_frees++;
        tes_free_remote(page, (tes_block_t *)p);
        return;
      }
    }
  }
#if !TES_SECURE
  else if (tes_segmap_get(p) == TES_UNIT_HOST) {
    /* A packed large block (large.c): the same check as a large block's
     * above, its segment found in its host's unit. */
    tes_segment_t *seg = tes_packed_segment_of(p);
    tes_heap_t *heap = tes_tls_heap;
    if (seg != NULL && !heap->is_static && tes_likely(tes_large_owned_block(seg, p))) {
      heap->counters.large_frees++;
      tes_large_free(seg);
      return;
    }
  }
#endif
  free_checked(p);
}

/* ---- messages and errors ------------------------------------------------------ */
TES_COLD void tes_message(const char *fmt, ...) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "tessera: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  if (len == 0 || buf[len - 1] != '\n') buf[len++] = '\n';
  tes_os_write_stderr(buf, len);
}

TES_COLD void tes_report_error(tes_error_kind_t kind, const void *p, const tes_page_t *page) {
  static const char *what[] = {
      [TES_ERR_INVALID_FREE] = "invalid free",
      [TES_ERR_DOUBLE_FREE] = "double free",
      [TES_ERR_OVERFLOW] = "heap buffer overflow detected at free",
      [TES_ERR_CORRUPT] = "corrupted free list",
      [TES_ERR_BIN_DAMAGED] = "double free (or a write after free)",
  };
  if (page != NULL && page->class_index != 0xff)
    tes_message("error: %s of %p (class %u, %zu bytes) in thread %ld", what[kind], p, (unsigned)page->class_index,
                page->block_size, tes_os_thread_id());
  else if (page != NULL)
    tes_message("error: %s of %p (large block, %zu bytes) in thread %ld", what[kind], p, page->block_size,
                tes_os_thread_id());
  else
    tes_message("error: %s of %p (not a block allocated by tessera) in thread %ld", what[kind], p,
                tes_os_thread_id());
  if (tes_opt(TES_OPTION_ABORT_ON_ERROR)) tes_os_abort();
}

void tes_lock_contended(tes_lock_t *lock) {
  const void *self = &tes_tls_heap;
  for (unsigned spins = 0;; spins++) {
    const void *holder = atomic_load_explicit(&lock->holder, memory_order_relaxed);
    if (holder == NULL && atomic_compare_exchange_weak_explicit(&lock->holder, &holder, self, memory_order_acquire,
                                                                memory_order_relaxed))
      return;
    /* Only this thread writes its own name there, and clears it before it
     * lets go: seeing it means this thread holds the lock (it was
     * interrupted while holding it, and re-entered). */
    if (tes_unlikely(holder == self)) tes_lock_reentered(lock);
    if (spins > 32) tes_os_yield();
    else __builtin_ia32_pause();
  }
}

_Noreturn void tes_lock_reentered(const tes_lock_t *lock) {
  if (tes_tls_heap->visit_depth > 0) /* the walk of every heap, or another thread's, holds the segments lock */
    tes_message("error: allocator re-entered in thread %ld from a tes_heap_visit visitor while the walk holds its "
                "lock %p (a visitor of every heap, or of another thread's, may call tes_collect, tes_heap_delete and "
                "tes_heap_destroy, nothing else of the allocator)",
                tes_os_thread_id(), (const void *)lock);
  else
    tes_message("error: allocator re-entered in thread %ld while that thread holds its lock %p (malloc or free in a "
                "signal handler that interrupted the allocator?)",
                tes_os_thread_id(), (const void *)lock);
  tes_os_abort();
}

/* No live block starts at p and no page in use holds it. A second free
 * of a block whose first free emptied its page or its segment lands here,
 * as does a pointer that was never ours; told apart on this error path
 * only:
 *  - a large block freed recently (large.c's ring): its segment left the
 *    segment map at the first free;
 *  - a block start of a retired page of a live segment (its descriptor
 *    keeps the class the page had): the first free emptied the page;
 *  - an address in one of the last small/medium segments released
 *    (segment.c's ring), whose blocks were all free then, unmapped or
 *    cached, or taken again and in a page that holds no block now;
 * each a double free. Otherwise p was never ours: an invalid free. (An
 * address that someone else has mapped since a segment of ours was
 * unmapped there is named a double free too: refused all the same.) */
TES_COLD void tes_report_unowned(const void *p) {
  size_t size;
  if (tes_large_freed_before(p, &size)) {
    tes_message("error: double free of %p (large block, %zu bytes, already freed) in thread %ld", p, size,
                tes_os_thread_id());
  } else if (((uintptr_t)p & 15) != 0) {
    tes_report_error(TES_ERR_INVALID_FREE, p, NULL);
    return;
  } else {
    tes_segment_t *seg = tes_segment_find(p);
    if (seg != NULL && seg->kind != TES_SEG_LARGE) {
      const tes_page_t *page = tes_page_of(seg, p);
      size_t offset = (size_t)((const uint8_t *)p - page->area);
      bool in_use = tes_page_in_use_any_thread(page);
      if (in_use || page->block_size == 0 || (const uint8_t *)p < page->area || offset % page->block_size != 0) {
        /* A page that holds no block now, of a segment released since and
         * taken again (a heap that took a segment of the other kind first
         * freed its emptied ones, growth_trim, and took one back at once):
         * a block of the segment's last life, freed again. */
        if (!in_use && tes_segment_released_before(p)) goto released;
        tes_report_error(TES_ERR_INVALID_FREE, p, NULL);
        return;
      }
      tes_report_error(TES_ERR_DOUBLE_FREE, p, page); /* its page was retired since */
      return;
    }
    if (seg != NULL || !tes_segment_released_before(p)) {
      tes_report_error(TES_ERR_INVALID_FREE, p, NULL);
      return;
    }
  released:
    tes_message("error: double free of %p (its segment was released after the block was freed) in thread %ld", p,
                tes_os_thread_id());
  }
  if (tes_opt(TES_OPTION_ABORT_ON_ERROR)) tes_os_abort();
}
