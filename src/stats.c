/* stats.c — statistics: ONE struct of counters per heap (tes_counters_t,
 * bumped only on slow paths, never atomically), merged on demand.
 *
 * The fast paths keep no counters at all; the numbers they would produce are
 * derived from what pages already track:
 *   allocations from a page  = installed (blocks ever put on its free list)
 *                              - blocks still on its free list
 *   owner frees into a page  = allocations - remote frees collected - growth
 *                              of its live count since the last fold
 * A page folds these into its heap's counters when it is retired or changes
 * owner; tes_stats_get adds the unfolded part of every page in use. A block
 * another thread freed counts as freed at once, though its page counts it
 * until the owner collects it (the page's remote stack and the heap's
 * delayed list are subtracted). Counts for the calling thread and for exited
 * threads are exact; for other running threads they are read without
 * stopping them (a snapshot, not a barrier).
 * Call counters are per API (a realloc that moves counts as one realloc, not
 * a malloc and a free). tes_stats_reset rebases the call counters only. */
#include "internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

tes_lock_t tes_stats_lock = TES_LOCK_INIT;
TES_BIG_BSS static tes_counters_t retired; /* heaps that are gone */
static _Atomic uint64_t threads_started, threads_exited, heaps_abandoned, heaps_reclaimed;
static _Alignas(64) _Atomic int64_t in_use_peak; /* a line of its own with the thread counters, away from the locks above */
TES_BIG_BSS static tes_stats_t reset_base; /* call counters at the last tes_stats_reset */

/* Taken around the whole abandon, and by tes_stats_get around its walks
 * (compute, below): an abandon on another thread (the purge thread or a
 * slow path abandoning a parked heap, a reap of a late heap) moves the
 * heap's counts between its counters, its pages and the retired total, and
 * its delayed blocks to their pages, while the walk read them one by one:
 * counted twice or not at all (TSan in sanitize.tsan; lib.api_purge_thread
 * churn). Outermost but for the report scratch and the late list (fork's
 * order, init.c). Out of line, here (built -Os): lib.fixed_cost_sizes. */
tes_lock_t tes_abandon_lock = TES_LOCK_INIT;
void tes_abandon_lock_take(void) { tes_lock(&tes_abandon_lock); }
void tes_abandon_lock_give(void) { tes_unlock(&tes_abandon_lock); }

static_assert(sizeof(tes_counters_t) % sizeof(uint64_t) == 0, "counters are a uint64_t array");

/* Room for the allocator's own readers of the statistics (mallinfo2,
 * malloc_stats, malloc_info, the exit reports): a tes_stats_t is 3.3 KB, and
 * on the caller's stack it overflowed 16 KiB thread stacks where glibc's
 * versions fit. One at a time: these calls are rare. Taken before any other
 * allocator lock (the fork handlers take it first too). */
tes_lock_t tes_report_scratch_lock = TES_LOCK_INIT;
TES_BIG_BSS static _Alignas(64) uint8_t report_scratch[TES_REPORT_SCRATCH_BYTES];

static_assert(sizeof(tes_stats_t) <= TES_REPORT_SCRATCH_BYTES, "a statistics struct fits the report scratch");

/* The holders write to the caller's stream with the scratch held
 * (malloc_info, tes_stats_print, the heap report), and fprintf, fputs and
 * write are cancellation points: a thread cancelled there was unwound with
 * the lock held, and every later mallinfo2, malloc_stats, malloc_info (and
 * fork, whose handler takes the lock) spun for ever. The holder's
 * cancelability is off until it gives the scratch back; a pending cancel
 * then acts at its next cancellation point. (glibc's malloc_info writes
 * with no lock held.) Set and read under the lock. */
static int scratch_holder_cancel_state;

void *tes_report_scratch_take(size_t size) {
  int state = tes_os_cancel_off();
  tes_lock(&tes_report_scratch_lock);
  scratch_holder_cancel_state = state;
  memset(report_scratch, 0, size);
  return report_scratch;
}
void tes_report_scratch_give(void) {
  int state = scratch_holder_cancel_state;
  tes_unlock(&tes_report_scratch_lock);
  tes_os_cancel_restore(state);
}

/* Reports are formatted into text first and then written whole: printing
 * with fprintf to an unbuffered stream (stderr) puts an 8 KiB buffer on the
 * stack for every call, which an exit report on a small-stack thread cannot
 * afford. Text that does not fit is cut, never overrun. */
void tes_text_add(tes_text_t *text, const char *fmt, ...) {
  if (text->length >= text->capacity) return;
  va_list args;
  va_start(args, fmt);
  int n = vsnprintf(text->buffer + text->length, text->capacity - text->length, fmt, args);
  va_end(args);
  if (n > 0) text->length += (size_t)n < text->capacity - text->length ? (size_t)n : text->capacity - text->length - 1;
}

/* stderr through the OS layer (no stdio buffer on the stack), any other
 * stream with fputs. */
void tes_text_write(const tes_text_t *text, FILE *out) {
  if (out == stderr) {
    fflush(stderr);
    tes_os_write_stderr(text->buffer, text->length);
  } else {
    fputs(text->buffer, out);
  }
}

static void add_counters(tes_counters_t *dst, const tes_counters_t *src) {
  uint64_t *d = (uint64_t *)dst;
  const uint64_t *s = (const uint64_t *)src;
  for (size_t i = 0; i < sizeof *dst / sizeof *d; i++) d[i] += s[i];
}

void tes_stats_fold_heap(tes_heap_t *heap) {
  tes_lock(&tes_stats_lock);
  add_counters(&retired, &heap->counters);
  tes_unlock(&tes_stats_lock);
  memset(&heap->counters, 0, sizeof heap->counters);
}

void tes_stats_thread_started(void) { atomic_fetch_add_explicit(&threads_started, 1, memory_order_relaxed); }
void tes_stats_thread_exited(void) { atomic_fetch_add_explicit(&threads_exited, 1, memory_order_relaxed); }
void tes_stats_heap_abandoned(void) { atomic_fetch_add_explicit(&heaps_abandoned, 1, memory_order_relaxed); }
void tes_stats_heap_reclaimed(void) { atomic_fetch_add_explicit(&heaps_reclaimed, 1, memory_order_relaxed); }

/* Length of one of a page's lists, never leaving the page (safe to run on a
 * page another thread is using: a racing list can only give a wrong count).
 * A link read from a block handed out meanwhile is the program's data: it
 * is followed only to a 16-byte boundary, as every block starts on, so the
 * link word read stays inside the area (an address 1-7 bytes short of its
 * end read past it, past the segment's end for its last page; UBSan
 * reported the misaligned load: sanitize.lib_park_stress_fork). */
static uint64_t bounded_count(const tes_page_t *page, const tes_block_t *b) {
  const uint8_t *lo = page->area, *hi = page->area + (size_t)page->reserved * page->block_size;
  uint64_t n = 0;
  while (b != NULL && n <= page->capacity) {
    if ((const uint8_t *)b < lo || (const uint8_t *)b >= hi || ((uintptr_t)b & 15) != 0) break;
    n++;
    b = tes_block_next(page, b);
  }
  return n;
}

static void compute(tes_stats_t *out) {
  memset(out, 0, sizeof *out);
  tes_counters_t total;
  memset(&total, 0, sizeof total);
  /* No heap is abandoned under the walks below (tes_abandon_lock, above):
   * an exited thread's heap is counted whole before or whole after. */
  tes_abandon_lock_take();
  tes_lock(&tes_stats_lock);
  add_counters(&total, &retired);
  tes_unlock(&tes_stats_lock);
  add_counters(&total, &tes_orphan_counters);
  /* Bins (default build): a pop is a malloc and a free no page saw; a block
   * still in a bin was freed, and its page counts it as live. */
  int64_t parked_bytes = 0;
  tes_heaps_lock();
  for (tes_heap_t *h = tes_heaps_all; h != NULL; h = h->all_next) {
    add_counters(&total, &h->counters);
    /* Blocks other threads freed into the heap's full pages, waiting on its
     * delayed list for the owner's next slow path: freed, though their pages
     * still count them (the links: see tes_maybe_small_block and
     * tes_delayed_decode). */
    const tes_block_t *b = atomic_load_explicit(&h->delayed_free, memory_order_acquire);
    for (size_t n = 0; b != NULL && n < TES_DELAYED_WALK_MAX && tes_maybe_small_block(b);
         n++, b = tes_delayed_decode(h, b->next)) {
      const tes_page_t *page = tes_page_of(tes_segment_of(b), b);
      if (!page->in_use || page->class_index >= TES_CLASS_COUNT) continue;
      out->class_live_blocks[page->class_index]--;
      parked_bytes += (int64_t)(page->block_size - TES_PADDING); /* as the pages count it below */
    }
    for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
#if TES_SECURE
      /* The hardened bins' blocks, counted as the pages count them below. */
      uint32_t held = c >= TES_MEDIUM_CLASS_FIRST ? tes_sbin_of(h, c)->count : 0;
      uint64_t pops = c >= TES_MEDIUM_CLASS_FIRST ? tes_sbin_of(h, c)->pops : 0;
      int64_t unit = (int64_t)(tes_class_size(c) - TES_PADDING);
#else
      uint32_t held = tes_bin_held(&h->bins[c]);
      uint64_t pops = tes_bin_pops(&h->bins[c]);
      int64_t unit = (int64_t)tes_class_size(c);
#endif
      total.class_allocs[c] += pops;
      total.class_local_frees[c] += pops + held;
      out->class_live_blocks[c] -= held;
      parked_bytes += (int64_t)held * unit;
    }
  }
  tes_heaps_unlock();

  int64_t small_in_use = -parked_bytes;
  tes_segments_lock();
  for (tes_segment_t *seg = tes_segments_all; seg != NULL; seg = seg->all_next) {
    for (uint32_t i = 1; i < seg->page_count; i++) {
      const tes_page_t *page = &seg->pages[i];
      if (!page->in_use) continue;
      unsigned c = page->class_index;
      if (c >= TES_CLASS_COUNT) continue;
      int64_t live = (int64_t)tes_page_live(page);
      uint64_t allocs = page->installed - bounded_count(page, page->free);
      /* Other threads' frees not collected yet: the page counts them as
       * used until its owner collects them, but they are freed. */
      uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
      int64_t live_now = live - (int64_t)tes_tf_count(tf);
#if TES_SECURE
      /* hardened: no counts there; the bits of those frees (page.c) */
      live_now -= (int64_t)tes_page_remote_pending(page, tes_page_capacity_any_thread(page));
#endif
      out->class_live_blocks[c] += live_now;
      small_in_use += live_now * (int64_t)(page->block_size - TES_PADDING); /* the hardened canary is not in use */
      total.class_allocs[c] += allocs;
      total.class_local_frees[c] += allocs - page->remote_collected - (uint64_t)(live - page->live_base);
    }
  }
  tes_segments_unlock(false);
  tes_abandon_lock_give();

  uint64_t allocs = 0, local_frees = 0;
  out->class_count = TES_CLASS_COUNT;
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    out->class_block_size[c] = tes_class_size(c) - TES_PADDING;
    out->class_malloc_calls[c] = total.class_allocs[c];
    allocs += total.class_allocs[c];
    local_frees += total.class_local_frees[c];
  }
  out->malloc_calls = allocs + total.large_allocs - total.other_allocs;
  out->free_calls = local_frees + total.remote_frees - total.delayed_processed + total.large_frees - total.other_frees;
  out->calloc_calls = total.calloc_calls;
  out->realloc_calls = total.realloc_calls;
  out->aligned_calls = total.aligned_calls;
  out->failed_calls = total.failed_calls + total.malloc_failed;
  out->fast_path_misses = total.slow_allocs;
  out->fast_path_hits = allocs - total.slow_allocs;
  out->cross_thread_frees = total.remote_frees;
  out->realloc_in_place = total.realloc_in_place;
  out->huge_remaps = total.huge_remaps;

  int64_t large = atomic_load(&tes_large_in_use);
  out->large_in_use.current = large;
  out->large_in_use.peak = atomic_load(&tes_large_in_use_peak);
  out->in_use.current = small_in_use + large;
  int64_t peak = atomic_load(&in_use_peak);
  while (out->in_use.current > peak && !atomic_compare_exchange_weak(&in_use_peak, &peak, out->in_use.current)) {
  }
  if (peak < out->in_use.current) peak = out->in_use.current;
  if (peak < out->large_in_use.peak) peak = out->large_in_use.peak;
  out->in_use.peak = peak;

  tes_os_counters_t os;
  tes_os_counters(&os);
  out->committed.current = os.committed;
  out->committed.peak = os.committed_peak;
  out->reserved.current = os.reserved;
  out->reserved.peak = os.reserved_peak;
  out->fragmentation_bytes = out->committed.current - out->in_use.current;
  out->fragmentation_percent =
      out->committed.current > 0 ? 100.0 * (double)out->fragmentation_bytes / (double)out->committed.current : 0.0;
  out->os_mmap_calls = os.mmap_calls;
  out->os_munmap_calls = os.munmap_calls;
  out->os_madvise_calls = os.madvise_calls;
  out->os_mremap_calls = os.mremap_calls;
  out->os_mmap_bytes = os.mmap_bytes;
  out->os_munmap_bytes = os.munmap_bytes;
  out->os_purged_bytes = os.purged_bytes;
  out->threads_started = atomic_load(&threads_started);
  out->threads_exited = atomic_load(&threads_exited);
  out->heaps_abandoned = atomic_load(&heaps_abandoned);
  out->heaps_reclaimed = atomic_load(&heaps_reclaimed);
}

/* The call counters tes_stats_reset rebases (memory gauges are left alone). */
#define CALL_COUNTERS(X)                                                                                     \
  X(malloc_calls) X(calloc_calls) X(realloc_calls) X(free_calls) X(aligned_calls) X(failed_calls)           \
  X(fast_path_hits) X(fast_path_misses) X(cross_thread_frees) X(realloc_in_place) X(huge_remaps)            \
  X(os_mmap_calls) X(os_munmap_calls) X(os_madvise_calls) X(os_mremap_calls) X(os_mmap_bytes)               \
  X(os_munmap_bytes) X(os_purged_bytes) X(threads_started) X(threads_exited) X(heaps_abandoned)             \
  X(heaps_reclaimed)

TES_API void tes_stats_get(tes_stats_t *out) {
  if (out == NULL) return;
  tes_process_init();
  compute(out);
  tes_lock(&tes_stats_lock);
#define SUB(f) out->f -= reset_base.f;
  CALL_COUNTERS(SUB)
#undef SUB
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) out->class_malloc_calls[c] -= reset_base.class_malloc_calls[c];
  tes_unlock(&tes_stats_lock);
}

TES_API void tes_stats_reset(void) {
  tes_stats_t now;
  tes_process_init();
  compute(&now);
  tes_lock(&tes_stats_lock);
#define SET(f) reset_base.f = now.f;
  CALL_COUNTERS(SET)
#undef SET
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) reset_base.class_malloc_calls[c] = now.class_malloc_calls[c];
  tes_unlock(&tes_stats_lock);
}

static void print_stats(tes_text_t *out, const tes_stats_t *s) {
  const double mib = 1024.0 * 1024.0;
  tes_text_add(out, "tessera statistics\n");
  tes_text_add(out, "  calls      malloc %" PRIu64 "  calloc %" PRIu64 "  realloc %" PRIu64 "  free %" PRIu64
               "  aligned %" PRIu64 "  failed %" PRIu64 "\n",
          s->malloc_calls, s->calloc_calls, s->realloc_calls, s->free_calls, s->aligned_calls, s->failed_calls);
  uint64_t small = s->fast_path_hits + s->fast_path_misses;
  tes_text_add(out, "  fast path  hits %" PRIu64 "  misses %" PRIu64 "  (%.2f%% hit rate)\n", s->fast_path_hits,
          s->fast_path_misses, small ? 100.0 * (double)s->fast_path_hits / (double)small : 0.0);
  tes_text_add(out, "  frees      cross-thread %" PRIu64 "  realloc in place %" PRIu64 "  huge remaps %" PRIu64 "\n",
          s->cross_thread_frees, s->realloc_in_place, s->huge_remaps);
  tes_text_add(out, "  memory     in use %.2f MiB (peak %.2f)  large %.2f MiB (peak %.2f)\n", s->in_use.current / mib,
          s->in_use.peak / mib, s->large_in_use.current / mib, s->large_in_use.peak / mib);
  tes_text_add(out, "             committed %.2f MiB (peak %.2f)  reserved %.2f MiB (peak %.2f)\n",
          s->committed.current / mib, s->committed.peak / mib, s->reserved.current / mib, s->reserved.peak / mib);
  tes_text_add(out, "             fragmentation %.2f MiB (%.1f%% of committed)\n", s->fragmentation_bytes / mib,
          s->fragmentation_percent);
  tes_text_add(out, "  os         mmap %" PRIu64 " (%.2f MiB)  munmap %" PRIu64 " (%.2f MiB)  madvise %" PRIu64
               " (%.2f MiB purged)  mremap %" PRIu64 "\n",
          s->os_mmap_calls, s->os_mmap_bytes / mib, s->os_munmap_calls, s->os_munmap_bytes / mib, s->os_madvise_calls,
          s->os_purged_bytes / mib, s->os_mremap_calls);
  tes_text_add(out, "             purge delay %ld ms now (TESSERA_PURGE_DELAY_MS %ld)\n", tes_purge_delay_current(),
          tes_opt(TES_OPTION_PURGE_DELAY_MS));
  tes_text_add(out, "  threads    started %" PRIu64 "  exited %" PRIu64 "  heaps abandoned %" PRIu64
               "  reclaimed %" PRIu64 "\n",
          s->threads_started, s->threads_exited, s->heaps_abandoned, s->heaps_reclaimed);
  tes_text_add(out, "  classes    %-10s %12s %12s\n", "block", "allocations", "live");
  for (uint32_t c = 0; c < s->class_count; c++) {
    if (s->class_malloc_calls[c] == 0 && s->class_live_blocks[c] == 0) continue;
    tes_text_add(out, "             %-10" PRIu64 " %12" PRIu64 " %12" PRId64 "\n", s->class_block_size[c],
            s->class_malloc_calls[c], s->class_live_blocks[c]);
  }
}


TES_API void tes_stats_print(FILE *out) {
  struct {
    tes_stats_t stats;
    char text[8192];
  } *r = tes_report_scratch_take(sizeof *r);
  static_assert(sizeof *r <= TES_REPORT_SCRATCH_BYTES, "fits the report scratch");
  tes_stats_get(&r->stats);
  tes_text_t text = {r->text, sizeof r->text, 0};
  print_stats(&text, &r->stats);
  tes_text_write(&text, out ? out : stderr);
  fflush(out ? out : stderr);
  tes_report_scratch_give();
}

void tes_stats_print_at_exit(void) { tes_stats_print(stderr); }
