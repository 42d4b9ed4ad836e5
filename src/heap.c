/* heap.c — per-thread heaps: page queues, the malloc slow path, retiring and
 * purging pages, thread exit (abandon) and reuse (adopt).
 *
 * A heap owns small/medium segments and, per size class, a queue of pages
 * that may have free blocks; the queue head is the page the direct table (the
 * fast path) points to, and it is "pinned" (+1 in used) so freeing its last
 * block does not leave the fast path. Pages with no free block move to the
 * `full` queue; remote frees into them come back through the heap's
 * delayed_free list (free.c). Empty pages are retired to their segment at
 * once and purged after TESSERA_PURGE_DELAY_MS (checked on slow paths, so
 * churn does not become a syscall storm). Only the owning thread touches a
 * heap, except the atomic delayed_free push, the process-wide heap list, and
 * (under purge_lock) the purge list and, in the hardened build, the memory
 * of kept empty pages (below).
 * Called from alloc.c/free.c (slow paths), init.c and heap_api.c. */
#include "alloc_inline.h"

tes_page_t tes_page_empty; /* free == NULL: every direct entry of an idle class */


static tes_lock_t heaps_lock = TES_LOCK_INIT;
tes_heap_t *tes_heaps_all;
static tes_heap_t *heap_pool;     /* released heap structs, linked via all_next */
static uint8_t *heap_chunk;       /* unused tail of the last mapped chunk */
static size_t heap_chunk_left;

/* Out of line, and every taker of the lock calls it: all are rare paths
 * (thread start and exit, sweeps), and inlined at each, the lock's loop
 * was some 100 bytes of text a call. */
TES_NOINLINE void tes_heaps_lock(void) { tes_lock(&heaps_lock); }
void tes_heaps_unlock(void) { tes_unlock(&heaps_lock); }
void tes_heaps_lock_reset(void) { tes_lock_reset(&heaps_lock); }
#ifdef TES_FAULT_INJECTION
#include "fault.h"
bool tes_global_lock_mine(void) {
  return tes_lock_mine(&heaps_lock) || tes_lock_mine(&tes_abandon_lock) || tes_segment_locks_mine() ||
         tes_large_lock_mine();
}
#endif

/* Fork (init.c), between the heaps lock and the segment locks (owners take
 * a purge lock first and segment and cache locks under it): every heap's
 * purge lock, so that none is held in the child by a thread that does not
 * exist there (a forced purge of every heap, malloc_trim in the child,
 * would wait on it for ever). The heaps lock is held, so the list stays. */
void tes_heaps_purge_locks_acquire(void) {
  for (tes_heap_t *heap = tes_heaps_all; heap != NULL; heap = heap->all_next) tes_lock(&heap->purge_lock);
}
void tes_heaps_purge_locks_release(bool child) {
  for (tes_heap_t *heap = tes_heaps_all; heap != NULL; heap = heap->all_next) {
    if (child) tes_lock_reset(&heap->purge_lock);
    else tes_unlock(&heap->purge_lock);
  }
}

/* Fork child (init.c), heaps lock held: a page tagged FREEING was being
 * handed a block by a thread that does not exist here, and its owner would
 * wait for that thread for ever (page_to_full, heap_stop_delayed). Put the
 * tag back to what the freer found, USE_DELAYED: the block it was handing
 * over is on the heap's delayed list or lost, never half-linked. */
static void pages_unfreeing(tes_page_t *p) {
  for (; p != NULL; p = p->next) {
    uintptr_t tf = atomic_load_explicit(&p->xthread_free, memory_order_relaxed);
    if ((tf & TES_TF_MASK) == TES_TF_FREEING)
      atomic_store_explicit(&p->xthread_free, (tf & ~TES_TF_MASK) | TES_TF_USE_DELAYED, memory_order_relaxed);
  }
}

TES_COLD void tes_heaps_after_fork_child(void) {
  for (tes_heap_t *heap = tes_heaps_all; heap != NULL; heap = heap->all_next) {
    heap->sweep_pins = 0; /* pinned by a walk of a thread that does not exist here */
    for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
      pages_unfreeing(heap->queues[c].first);
      pages_unfreeing(heap->kept[c].first);
    }
    pages_unfreeing(heap->full.first);
  }
}

/* The direct-table entries of class c: direct[DIRECT_FIRST(c)] up to and
 * including direct[size / 16]. Only classes up to TES_DIRECT_MAX have any. */
#define DIRECT_CLASSES 24 /* 16..256 in 16-byte steps, then four classes up to 512 and four up to 1024 */
#define DIRECT_FIRST(c) ((c) == 0 ? 0 : TES_CLASS_SIZE_EXPR((c)-1) / 16 + 1)
#define DIRECT_ENTRIES(c) (TES_CLASS_SIZE_EXPR(c) / 16 + 1 - DIRECT_FIRST(c))
static_assert(TES_CLASS_SIZE_EXPR(DIRECT_CLASSES - 1) == TES_DIRECT_MAX, "the last class with direct entries");
/* class_head_changed stores 1, 2, 4 or 8 entries without a loop. */
static_assert(DIRECT_ENTRIES(0) == 2 && DIRECT_ENTRIES(1) == 1 && DIRECT_ENTRIES(15) == 1, "sizes 0-256");
static_assert(DIRECT_ENTRIES(16) == 4 && DIRECT_ENTRIES(19) == 4, "sizes 257-512");
static_assert(DIRECT_ENTRIES(20) == 8 && DIRECT_ENTRIES(23) == 8, "sizes 513-1024");
#define DIRECT_FIRST_4(c) DIRECT_FIRST(c), DIRECT_FIRST((c) + 1), DIRECT_FIRST((c) + 2), DIRECT_FIRST((c) + 3)
static const uint8_t direct_first[DIRECT_CLASSES] = {DIRECT_FIRST_4(0),  DIRECT_FIRST_4(4),  DIRECT_FIRST_4(8),
                                                     DIRECT_FIRST_4(12), DIRECT_FIRST_4(16), DIRECT_FIRST_4(20)};

/* ---- bins (default build) --------------------------------------------------- */
tes_bin_t tes_bin_closed = {.head = TES_BIN_END}; /* room 0 for ever: retired, abandoned and secure pages */
const uintptr_t tes_bin_end_words[2] = {0, 1};

/* Blocks a bin of class c may hold (its limit, bin_limits_table below;
 * BIN_BLOCKS_EXPR: `kib` KiB worth, at least 2 and at most `most`): 256
 * KiB worth, at least 2 and at most 64 (more while grown: bin_grow,
 * below), both halved for the classes of 1-8 KiB, which are eight a doubling
 * (twentieth session: the same bytes a doubling as with four; with the full
 * budget the `aligned` row's peak RSS went 10.4 -> 16.5 MiB), so all bins of
 * a heap full at once hold about 6.8 MiB, until the next flush;
 * none with TESSERA_BINS=0. The hardened build's (tes_sbin_t) hold 1 MiB
 * worth, at most TES_SBIN_SLOTS (all full: about 12.4 MiB; 3.8 MiB with
 * 256 KiB worth), and only its medium classes have any: with 256 KiB
 * worth (the 64 KiB class 4 blocks, the 128 KiB class 2) fit-large's
 * medium mallocs ran out of binned blocks and took the miss path three
 * times as often, 106.0 M instructions against 85.9 M (512 KiB: 90.9 M;
 * 4 MiB: 85.2 M; RELIABILITY.md, twentieth session). Less is slower where
 * medium blocks churn: fit-large ran 1.27x the time with 128 KiB worth (at
 * least 2), 1.52x with 32 KiB (at least 1); see PERFORMANCE.md. */
/* What bin_grow may raise a bin to: 1 MiB worth (and TES_BIN_GROWN_BLOCKS). */
#define TES_BIN_GROWN_KIB 1024
/* share = tes_class_steps(c) / 4 (2 for the eighths), n = (kib KiB) /
 * share / size of c, then n clamped to [2, most / share]: a constant
 * expression (tests/lib/unit_bin_limits.c checks the table against it). */
#define BIN_SHARE_(c) ((c) >= TES_CLASS_EIGHTHS_FIRST && (c) < TES_CLASS_EIGHTHS_END ? 2u : 1u)
#define BIN_N_(c, kib) (((size_t)(kib) << 10) / BIN_SHARE_(c) / TES_CLASS_SIZE_EXPR(c))
#define BIN_BLOCKS_EXPR(c, most, kib)                                                                  \
  (BIN_N_(c, kib) < 2 ? 2u                                                                             \
   : BIN_N_(c, kib) > (most) / BIN_SHARE_(c) ? (most) / BIN_SHARE_(c) : (unsigned)BIN_N_(c, kib))
/* A bin's limits, per class, for TESSERA_BINS off ([0]: none) and on ([1]),
 * built at compile time: a flush sets every bin's from here. Worked out
 * at each flush (two divisions and the option a class), they were 2,660 of
 * a flush's 7,300 instructions (lib.flush_budget; PERFORMANCE.md,
 * twenty-fifth session, flush25). */
typedef struct {
  uint16_t limit; /* tes_bin_t.limit, tes_sbin_t.limit */
  uint16_t most;  /* tes_bin_t.most (default build) */
} bin_limits_t;
#if TES_SECURE
/* Medium classes only (internal.h), 1 MiB worth, at most TES_SBIN_SLOTS. */
#define BIN_LIMITS_(c) {(c) < TES_MEDIUM_CLASS_FIRST ? 0u : BIN_BLOCKS_EXPR(c, TES_SBIN_SLOTS, 1024), 0}
#else
#define BIN_LIMITS_(c) {BIN_BLOCKS_EXPR(c, 64, 256), BIN_BLOCKS_EXPR(c, TES_BIN_GROWN_BLOCKS, TES_BIN_GROWN_KIB)}
#endif
#define BIN_LIMITS_4_(c) BIN_LIMITS_(c), BIN_LIMITS_((c) + 1), BIN_LIMITS_((c) + 2), BIN_LIMITS_((c) + 3)
#define BIN_LIMITS_16_(c) BIN_LIMITS_4_(c), BIN_LIMITS_4_((c) + 4), BIN_LIMITS_4_((c) + 8), BIN_LIMITS_4_((c) + 12)
static const bin_limits_t bin_limits_table[2][TES_CLASS_COUNT] = {
    {{0, 0}}, {BIN_LIMITS_16_(0), BIN_LIMITS_16_(16), BIN_LIMITS_16_(32), BIN_LIMITS_16_(48)}};
static_assert(TES_CLASS_COUNT == 64, "bin_limits_table lists 64 classes");
/* The limits of every class under the current TESSERA_BINS setting. */
static const bin_limits_t *bin_limits(void) { return bin_limits_table[tes_opt(TES_OPTION_BINS) != 0]; }

/* What bin_grow may raise the heap's bins by in all. */
#define TES_BIN_GROWN_MAX ((size_t)8 << 20)
/* With no bin grown, tes_bin_room_out reads the clock (and runs the
 * deferred work when due) at one call in this many (below). */
#define TES_ROOM_OUT_CLOCK 64

/* Set the limits of empty bins (the option may have changed since). */
#if !TES_SECURE
/* An empty bin whose pops are folded gets the table's limit and ceiling. */
static inline void bin_reset_limits(tes_bin_t *bin, const bin_limits_t *limits) {
  bin->limit = limits->limit;
  bin->most = limits->most;
  bin->tally = TES_BIN_TALLY(bin->limit);
}
#endif

static __attribute__((cold)) void bins_set_limits(tes_heap_t *heap) {
  const bin_limits_t *limits = bin_limits();
#if !TES_SECURE
  heap->bins_grown = 0;
#endif
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
#if TES_SECURE
    if (c >= TES_MEDIUM_CLASS_FIRST) tes_sbin_of(heap, c)->limit = limits[c].limit;
#else
    bin_reset_limits(&heap->bins[c], &limits[c]); /* the bins are empty, the pops folded */
#endif
  }
}

#if !TES_SECURE
/* A malloc slow path of class c found its bin empty and the class's head
 * page with blocks on local_free, where its owner's frees go only past a
 * full bin (or a flush): the program frees, then allocates, more blocks of
 * the class at a time than the bin holds. The bin then kept the first
 * blocks of each round of frees, the coldest, and sent the last ones, the
 * ones in cache, to their pages (fit_cpe357: 100 blocks of 1 KiB, a bin of
 * 64: 1.6 L1 read misses a malloc against tcmalloc's 0.9, whose per-class
 * lists grow with such use: gperftools thread_cache.cc,
 * FetchFromCentralCache; fit_large_range: a round's 50 frees of 32 B-64 KiB
 * blocks overflowed the medium bins of 2-25, and its mallocs popped blocks
 * freed long before from the pages). So the bin doubles, up to 1 MiB
 * worth (the hardened bins' budget) and TES_BIN_GROWN_BLOCKS (halved for
 * the eighths; 255 until the twenty-second session, which left
 * bench_batch's rounds of about 1,250 blocks a class half in the bin and
 * half on pages that retired and were carved again), the heap's bins by TES_BIN_GROWN_MAX bytes in all, until
 * the next flush sets the limits back (bins_flush, once per purge delay).
 * All bins full at once then hold at most 6.4 + 8 MiB (PERFORMANCE.md,
 * twenty-first session: 4 MiB left fit-large at 0.78 of the time before,
 * 8 MiB 0.68, no bound 0.65). The bin is empty: its room is its limit,
 * before and after. */
static void bin_fold_one(tes_heap_t *heap, unsigned c, bool dropped);
static TES_NOINLINE void bin_grow(tes_heap_t *heap, tes_bin_t *bin, unsigned c) {
  uint32_t limit = bin->limit * 2 < bin->most ? bin->limit * 2 : bin->most;
  size_t size = tes_class_size(c), left = TES_BIN_GROWN_MAX - heap->bins_grown;
  if ((limit - bin->limit) * size > left) limit = bin->limit + (uint32_t)(left / size);
  if (limit == bin->limit) return;
  bin_fold_one(heap, c, false); /* the pops counted: the room below is the whole limit */
  heap->bins_grown += (limit - bin->limit) * size;
  bin->limit = limit; /* first: a racy reader (tes_bin_held) sees room <= limit */
  bin->tally = TES_BIN_TALLY(limit);
}
#endif

static void bins_reset(tes_heap_t *heap) {
  heap->bins_due = 0;
  for (size_t i = 0; i < TES_DIRECT_COUNT; i++) heap->direct_bin[i] = &heap->bins[TES_DIRECT_CLASS_EXPR(i)];
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    heap->bins[c].head = TES_BIN_END;
    heap->bins[c].tally = 0;
#if TES_SECURE
    if (c >= TES_MEDIUM_CLASS_FIRST) {
      tes_sbin_of(heap, c)->count = 0;
      tes_sbin_of(heap, c)->pops = 0;
    }
#endif
  }
  bins_set_limits(heap);
}

/* Fold the bins' traffic into the heap's counters: every pop was a malloc
 * and a free of its class that no page saw; `dropped` blocks still in a bin
 * (tes_heap_free_all) were freed too. */
static void bins_fold(tes_heap_t *heap, bool dropped) {
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
#if TES_SECURE
    if (c < TES_MEDIUM_CLASS_FIRST) continue;
    tes_sbin_t *bin = tes_sbin_of(heap, c);
    heap->counters.class_allocs[c] += bin->pops;
    heap->counters.class_local_frees[c] += bin->pops + (dropped ? bin->count : 0);
    bin->pops = 0;
#else
    bin_fold_one(heap, c, dropped);
#endif
  }
}

#if !TES_SECURE
/* One bin's pops into the heap's counters; its room is then limit - held
 * (internal.h, TES_BIN_POP). */
static __attribute__((cold)) void bin_fold_one(tes_heap_t *heap, unsigned c, bool dropped) {
  tes_bin_t *bin = &heap->bins[c];
  uint32_t held = tes_bin_held(bin);
  heap->counters.class_allocs[c] += tes_bin_pops(bin);
  heap->counters.class_local_frees[c] += tes_bin_pops(bin) + (dropped ? held : 0);
  bin->tally = TES_BIN_TALLY(bin->limit - held);
}
#endif

#if TES_SECURE
/* Every block of one hardened bin back to its page (which may
 * retire). The slots are the heap's own memory: no link to distrust. */
static void sbin_flush(tes_sbin_t *bin) {
  for (uint32_t i = 0; i < bin->count; i++) {
    tes_block_t *b = bin->slot[i];
    tes_free_local_block(tes_page_of(tes_segment_of(b), b), b);
  }
  bin->count = 0;
}

void *tes_sbin_damaged(tes_heap_t *heap, tes_page_t *page, tes_block_t *block, size_t size) {
  tes_report_error(TES_ERR_CORRUPT, block, page);
  return tes_heap_malloc_generic(heap, size, false); /* the block stays out: its page keeps counting it */
}
#endif

__attribute__((cold)) void tes_bin_refuse(tes_bin_t *bin) {
  tes_block_t *block = bin->head;
  /* The head came from our own free, or from the link of a block whose
   * mark was intact: look its page up only if a segment of ours holds it. */
  const tes_page_t *page = tes_segmap_get(block) == TES_UNIT_START ? tes_page_of(tes_segment_of(block), block) : NULL;
  tes_report_error(TES_ERR_BIN_DAMAGED, block, page);
  /* When the program goes on: the blocks still in the bin are dropped (their
   * pages keep counting them, a leak), because the link that reaches past
   * this block is the program's data. */
  bin->head = TES_BIN_END;
  /* Empty: held 0 with the pops kept (internal.h, TES_BIN_POP), so the
   * room is what the drift has not borrowed. */
  uint64_t drift = tes_bin_drift_of(bin->tally);
  tes_bin_set_room(bin, drift < bin->limit ? bin->limit - (uint32_t)drift : 0);
}

void *tes_bin_refuse_malloc(tes_heap_t *heap, tes_bin_t *bin, size_t size) {
  tes_bin_refuse(bin);
  return tes_heap_malloc_generic(heap, size, false);
}

#if !TES_SECURE
/* Give every block in one bin back to its page (which may retire). No more
 * steps than the bin holds, so a list damaged by a use-after-free write
 * cannot keep the walk going; nor past a block that lost its mark (a double
 * free: TES_BIN_POP_OR_RETURN). */
static void bin_flush_to(tes_bin_t *bin, uint32_t keep) {
  for (uint32_t held = tes_bin_held(bin); held > keep && bin->head != TES_BIN_END; held--) {
    tes_block_t *b = bin->head;
    if (tes_unlikely(*tes_bin_mark(b) != (uintptr_t)bin)) {
      tes_bin_refuse(bin);
      break;
    }
    bin->head = b->next;
    *tes_bin_mark(b) = 0;
    bin->tally += TES_BIN_ROOM_ONE;
    tes_free_local_block(tes_page_of(tes_segment_of(b), b), b);
  }
}

static void bin_flush(tes_bin_t *bin) {
  bin_flush_to(bin, 0);
  bin->head = TES_BIN_END;
}
#endif

#if !TES_SECURE
/* The park's flush (tes_heap_park): a bin's blocks go back to their pages
 * only where that empties the page (which then retires, and its segment
 * may be released, so that a block freed again after the exit is named as
 * such: security.*_released_exited); the others stay in the bin, marked,
 * for the thread that takes the heap over. Flushed, the block an exited
 * thread freed last sat on its page's local list, and a second free of it
 * went unreported: by another thread while the heap waits, onto the page's
 * remote stack (security.default_double_free_parked{,_medium}: the block
 * then on two lists), or by the thread that takes the heap over, into its
 * bin (handed out twice, then SIGSEGV in malloc's pop: the program's data
 * as the page's list head). Kept, the first finds the mark
 * (tes_free_remote) and the second the bin's checks. A page's blocks are
 * all in its class's bin, so its live count without them is its `used`
 * less those found here. At most 64 blocks (the bins' limit); the walk
 * stops, reported, at a block without the mark, as bin_flush's does (met
 * twice: the walk clears each mark it passes). */
static __attribute__((cold)) void bin_park(tes_bin_t *bin, uint32_t limit) {
  /* Most often every block's page has more live blocks than the bin holds
   * (larson: 98% of the blocks kept): then the bin stays as it is, after a
   * walk that writes nothing (bench_larson --scale 0.1 --threads 4 under
   * callgrind: the parks' bins 1.4 M instructions, as the flush's were; the
   * full walk below for every bin took 3.0 M; RELIABILITY.md, twenty-first
   * session). */
  uint32_t held = tes_bin_held(bin), i = 0;
  if (limit == bin->limit) {
    tes_block_t *b = bin->head;
    for (; i < held && b != TES_BIN_END; i++, b = b->next) {
      const tes_page_t *page = tes_page_of(tes_segment_of(b), b);
      if (*tes_bin_mark(b) != (uintptr_t)bin || page->in_full || tes_page_live(page) <= held) break;
    }
    if (i == held) return;
  }
  enum { MOST = 64 };
  /* A grown bin (bin_grow) may hold up to TES_BIN_GROWN_BLOCKS: those past MOST go back to
   * their pages first, or the walk below would leave them off every list
   * (a leak, their pages never empty). */
  bin_flush_to(bin, MOST);
  tes_block_t *blocks[MOST];
  tes_page_t *pages[MOST];
  bool flush[MOST];
  uint32_t n = 0;
  for (uint32_t held = tes_bin_held(bin); held > 0 && bin->head != TES_BIN_END && n < MOST; held--) {
    tes_block_t *b = bin->head;
    if (tes_unlikely(*tes_bin_mark(b) != (uintptr_t)bin)) {
      tes_bin_refuse(bin);
      break;
    }
    bin->head = b->next;
    *tes_bin_mark(b) = 0;
    tes_page_t *page = tes_page_of(tes_segment_of(b), b);
    if (!page->in_full) page->used--; /* taken back below */
    blocks[n] = b;
    pages[n++] = page;
  }
  bool any = false;
  for (uint32_t i = 0; i < n; i++) any |= flush[i] = pages[i]->in_full || tes_page_live(pages[i]) == 0;
  if (n > limit) any = true; /* TESSERA_BINS changed since: all of them back */
  tes_block_t *head = TES_BIN_END;
  uint32_t kept = 0;
  for (uint32_t i = n; i-- > 0;) { /* the kept ones in their order */
    if (!pages[i]->in_full) pages[i]->used++;
    if (flush[i] || n > limit) continue;
    blocks[i]->next = head;
    *tes_bin_mark(blocks[i]) = (uintptr_t)bin;
    head = blocks[i];
    kept++;
  }
  bin->head = head;
  bin->limit = limit;
  bin->tally = TES_BIN_TALLY(limit - kept); /* the pops folded (bins_park) */
  if (tes_unlikely(any))
    for (uint32_t i = 0; i < n; i++)
      if (flush[i] || n > limit) tes_free_local_block(pages[i], blocks[i]);
}
#endif

/* Class c's bin, of either build, back to its pages. */
static void class_bin_flush(tes_heap_t *heap, unsigned c) {
#if TES_SECURE
  if (c >= TES_MEDIUM_CLASS_FIRST) sbin_flush(tes_sbin_of(heap, c));
#else
  bin_flush(&heap->bins[c]);
#endif
}

/* Every bin of the heap, then take the current TESSERA_BINS setting. */
static void bins_flush(tes_heap_t *heap) {
#if TES_SECURE
  bins_fold(heap, false);
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) class_bin_flush(heap, c);
  bins_set_limits(heap);
#else
  const bin_limits_t *limits = bin_limits();
  heap->bins_grown = 0;
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    tes_bin_t *bin = &heap->bins[c];
    /* Untouched since the last flush (empty, no pops counted, its limits
     * those of now): nothing to fold, give back or set. Most bins of a
     * flush are (lib.flush_budget: 56 of 64; the fold, walk and set of all
     * 64 were 4,600 of a flush's 7,300 instructions). */
    if (bin->head == TES_BIN_END && bin->limit == limits[c].limit && bin->most == limits[c].most &&
        bin->tally == TES_BIN_TALLY(limits[c].limit))
      continue;
    bin_fold_one(heap, c, false);
    bin_flush(bin);
    bin_reset_limits(bin, &limits[c]);
  }
#endif
}

/* bins_flush for the park: the default build's bins keep the blocks whose
 * pages stay in use (bin_park). */
static TES_COLD void bins_park(tes_heap_t *heap) {
#if TES_SECURE
  bins_flush(heap);
#else
  bins_fold(heap, false);
  const bin_limits_t *limits = bin_limits();
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    bin_park(&heap->bins[c], limits[c].limit);
    /* The ceiling too: a heap parked while TESSERA_BINS was off kept 0
     * there after a park with it on, and its next owners' bins could not
     * grow until its next flush (unit_bin_limits). */
    heap->bins[c].most = limits[c].most;
  }
  heap->bins_grown = 0; /* every limit is back to the table's */
#endif
}

/* Initialise a heap from tes_heap_alloc_struct, then publish it on the list
 * of all heaps: only then can tes_stats_get and tes_heap_visit, which walk
 * that list from other threads, see it (before, they could read a heap half
 * set up, e.g. a bin whose limit was set and whose room was not yet, which
 * counted `limit` phantom blocks). */
TES_COLD void tes_heap_setup(tes_heap_t *heap, uintptr_t thread_id, tes_heap_t *thread_default) {
  for (size_t i = 0; i < TES_DIRECT_COUNT; i++) heap->direct[i] = &tes_page_empty;
  bins_reset(heap);
  /* An empty slot is any tag no pointer's slice equals. 0 is one in every
   * slot but slot 0, which also serves slice 0 (NULL and the first 64 KiB):
   * so one store, and the other 64 KiB of tags stay as the zeroed table
   * has them (untouched memory for a new thread). (With TES_SLICE_BIAS no
   * user address has slice 0 any more; the store keeps slot 0 as every
   * cleared slot is, UINTPTR_MAX.) */
  heap->slices->tag[0] = UINTPTR_MAX;
  heap->thread_id = thread_id;
  heap->thread_default = thread_default ? thread_default : heap;
  atomic_store_explicit(&heap->purge_due, INT64_MAX, memory_order_relaxed);
  atomic_store_explicit(&heap->kept_purge_due, INT64_MAX, memory_order_relaxed);
  heap->keys[0] = (uintptr_t)tes_random_next(); /* the delayed list is empty here (tes_delayed_encode) */
  heap->keys[1] = (uintptr_t)tes_random_next();
  heap->random = tes_random_next() | 1;
#if TES_SECURE
  heap->bin_random = tes_random_next();
#endif
  tes_heaps_lock();
  heap->all_prev = NULL;
  heap->all_next = tes_heaps_all;
  if (tes_heaps_all) tes_heaps_all->all_prev = heap;
  tes_heaps_all = heap;
  tes_unlock(&heaps_lock);
}

TES_COLD tes_heap_t *tes_heap_alloc_struct(void) {
  tes_heap_t *heap = NULL;
  bool pooled = false;
  uint8_t *spare = NULL;
  size_t spare_size = 0;
  /* The struct, then its slice table. */
  const size_t struct_size = (sizeof(tes_heap_t) + 63) & ~(size_t)63;
  tes_heaps_lock();
  if (heap_pool != NULL) {
    heap = heap_pool;
    heap_pool = heap->all_next;
    pooled = true;
  } else {
    /* Rounded up to a line: when tes_slices_t ended in tag_runs_written
     * (padded to 8 bytes), every struct after a chunk's first started 8
     * bytes further off a line, and shared its first line (its direct
     * pages) with the previous thread's tag_runs_written, which that thread
     * writes at every page it hands out. (The field now comes first, on a
     * line of its own; the table is a whole number of lines.) */
    size_t need = (struct_size + sizeof(tes_slices_t) + 63) & ~(size_t)63;
    if (heap_chunk_left < need) {
      /* A new chunk, mapped with the lock let go (a thread starting or
       * exiting meanwhile would spin on it for the call); another thread
       * may have mapped one too: the first carves, a spare goes back. */
      size_t chunk = 16 * need;
      chunk = (chunk + tes_os_page_size() - 1) & ~(tes_os_page_size() - 1);
      tes_unlock(&heaps_lock);
      uint8_t *p = tes_os_map_aligned(chunk, tes_os_page_size());
      tes_heaps_lock();
      if (p != NULL && heap_chunk_left < need) {
        heap_chunk = p;
        heap_chunk_left = chunk;
        p = NULL;
      }
      if (p != NULL) spare = p, spare_size = chunk;
    }
    if (heap_chunk_left >= need) {
      heap = (tes_heap_t *)heap_chunk;
      heap_chunk += need;
      heap_chunk_left -= need;
    }
  }
  tes_unlock(&heaps_lock);
  if (spare != NULL) tes_os_unmap(spare, spare_size);
  /* Off every list now (a pooled heap left tes_heaps_all on release), so
   * nobody else reads it until tes_heap_setup publishes it. A new one comes
   * from a fresh mapping, zero already: left untouched, the pages of the
   * struct that a thread does not use never become resident (with the one
   * slice tag of tes_heap_setup: 1,000 idle threads, 52.4 -> 50.9 MB). */
  if (pooled) {
    memset(heap, 0, sizeof *heap);
    /* Of the table, only the tags its last thread set (a write to the
     * others would make all 64 KiB resident); the pages are read only
     * after a tag matched. */
    tes_slices_t *slices = (tes_slices_t *)((uint8_t *)heap + struct_size);
    for (size_t run = 0; run < TES_SLICE_SLOTS / TES_SLICE_TAG_RUN; run++)
      if (slices->tag_runs_written & (1u << run))
        memset(&slices->tag[run * TES_SLICE_TAG_RUN], 0, TES_SLICE_TAG_RUN * sizeof(uintptr_t));
    slices->tag_runs_written = 0; /* slot 0's tag: tes_heap_setup, which every caller runs next */
  }
  if (heap != NULL) heap->slices = (tes_slices_t *)((uint8_t *)heap + struct_size);
  return heap;
}

TES_COLD void tes_heap_release_struct(tes_heap_t *heap) {
  tes_heaps_lock();
  while (heap->sweep_pins != 0) { /* a walk purges it (tes_heaps_purge): it keeps its place until then */
    tes_unlock(&heaps_lock);
    tes_os_yield();
    tes_heaps_lock();
  }
  if (heap->all_prev) heap->all_prev->all_next = heap->all_next;
  else tes_heaps_all = heap->all_next;
  if (heap->all_next) heap->all_next->all_prev = heap->all_prev;
  heap->all_prev = NULL;
  heap->all_next = heap_pool;
  heap_pool = heap;
  tes_unlock(&heaps_lock);
}

/* ---- queues ---------------------------------------------------------------- */
static void pin(tes_page_t *page) {
  if (!page->pinned) {
    page->pinned = 1;
    page->used++;
  }
}

/* The head of class c changed: repoint the direct table, pin the new head.
 * The entries from a table and stored unrolled: with their range computed
 * from the class sizes and stored in a loop, this was 48 instructions a
 * call for the classes of 320-512 bytes (the hardened fit-small row moves
 * a head once every two slow-path mallocs). */
TES_INLINE void direct_set(tes_heap_t *heap, unsigned c, tes_page_t *entry) {
  tes_page_t **d = &heap->direct[direct_first[c]];
  d[0] = entry;
  if (c == 0) d[1] = entry;
  if (c >= 16) {
    d[1] = d[2] = d[3] = entry;
    if (c >= 20) d[4] = d[5] = d[6] = d[7] = entry;
  }
}

static void class_head_changed(tes_heap_t *heap, unsigned c) {
  tes_page_t *head = heap->queues[c].first;
  if (head != NULL) pin(head);
  if (c >= DIRECT_CLASSES) return;
  direct_set(heap, c, head != NULL ? head : &tes_page_empty);
}

static void queue_push_back(tes_page_queue_t *q, tes_page_t *page) {
  page->next = NULL;
  page->prev = q->last;
  if (q->last) q->last->next = page;
  else q->first = page;
  q->last = page;
}

static void queue_unlink(tes_page_queue_t *q, tes_page_t *page) {
  if (page->prev) page->prev->next = page->next;
  else q->first = page->next;
  if (page->next) page->next->prev = page->prev;
  else q->last = page->prev;
  page->next = page->prev = NULL;
}

/* Remove a page from whichever queue holds it; unpins it. */
void tes_heap_queue_remove(tes_heap_t *heap, tes_page_t *page) {
  if (page->in_full) {
    queue_unlink(&heap->full, page);
    return;
  }
  unsigned c = page->class_index;
  bool was_head = heap->queues[c].first == page;
  queue_unlink(&heap->queues[c], page);
  if (page->pinned) {
    page->pinned = 0;
    page->used--;
  }
  if (was_head) class_head_changed(heap, c);
}

static void class_push_back(tes_heap_t *heap, tes_page_t *page) {
  unsigned c = page->class_index;
  bool was_empty = heap->queues[c].first == NULL;
  queue_push_back(&heap->queues[c], page);
  if (was_empty) class_head_changed(heap, c);
}

/* ---- statistics folding ---------------------------------------------------- */
void tes_heap_fold_page(tes_heap_t *heap, tes_page_t *page, bool reset) {
  uint64_t on_free = tes_page_free_count(page);
  uint64_t allocs = page->installed - on_free;
  int64_t live = (int64_t)tes_page_live(page);
  int64_t local_frees = (int64_t)allocs - (int64_t)page->remote_collected - (live - page->live_base);
  unsigned c = page->class_index;
  heap->counters.class_allocs[c] += allocs;
  heap->counters.class_local_frees[c] += (uint64_t)local_frees;
  heap->counters.class_remote_collected[c] += page->remote_collected;
  if (reset) {
    page->installed = on_free;
    page->remote_collected = 0;
    page->live_base = live;
  }
}

/* ---- purge list --------------------------------------------------------------
 * Changed only under heap->purge_lock: the purge thread (purge.c) purges a
 * heap's due pages while its owner may be busy elsewhere (or idle for good).
 * The owner takes the lock on the slow paths that retire, take back or purge
 * pages; its fast paths never touch retired pages. */
static void purge_due_update(tes_heap_t *heap) {
  int64_t due = heap->purge.first != NULL ? heap->purge.first->purge_expire : INT64_MAX;
  atomic_store_explicit(&heap->purge_due, due, memory_order_relaxed);
}

static void purge_list_remove(tes_heap_t *heap, tes_page_t *page) {
  queue_unlink(&heap->purge, page);
  page->purge_pending = 0;
}

/* What a retired page's blocks were carved to (0: a page of a segment taken
 * dirty from the cache that this heap never carved, schedule_dirty_pages). */
static size_t retired_carved(const tes_page_t *page) {
#if TES_SECURE
  return (size_t)page->retired_capacity * page->block_size;
#else
  return (size_t)page->capacity * page->block_size;
#endif
}

/* What a retired page can hold resident, at most: the blocks carved in it
 * (a page scheduled with a segment taken dirty from the cache,
 * schedule_dirty_pages, was carved by an earlier owner: all of it). The
 * hardened build zeroes a retired page's capacity and keeps it in
 * retired_capacity; read as 0 until the twenty-first session, every
 * retired page counted whole there, and a parked heap's trim purged what
 * the next thread faulted in again (mstress/8t: 1,487 madvise calls against
 * the default build's 432). */
static size_t retired_bytes(const tes_page_t *page) {
  size_t page_size = (size_t)1 << tes_segment_of(page)->page_shift;
  size_t carved = retired_carved(page);
  return carved == 0 || carved > page_size ? page_size : carved;
}

/* Purge `first` (a page on the purge list) and the pages that follow it in
 * the list and in its segment, due at `now` (all of them when force; with
 * carved_only, those this heap carved); returns the bytes purged. With
 * `excess`, the run stops once the pages purged account for that many
 * bytes (retired_bytes), which it counts down. A forced purge dates its
 * pages `stamp`: 0 (a purge the program asked for, or a heap leaving: a
 * retake is not judged), or the clock negated (the growth purge: purge.c,
 * tes_purge_note_retake). The purge_lock is held. */
static size_t purge_run_locked(tes_heap_t *heap, tes_page_t *first, int64_t now, bool force, size_t *excess,
                               int64_t stamp, bool carved_only, bool spare_trimmed) {
  /* The next pages of the list that are due and follow this one in its
   * segment go in the same call (purge_expire now dates the purge, for
   * tes_purge_note_retake; a forced one, tes_collect, is the program's
   * request and is not judged). */
  tes_segment_t *seg = tes_segment_of(first);
  unsigned count = 0;
  tes_page_t *page = first;
  while (page != NULL && first->index + count < seg->page_count && page == &seg->pages[first->index + count] &&
         (force || page->purge_expire <= now) && (!carved_only || retired_carved(page) != 0) &&
         (!spare_trimmed || !page->trim_retired) &&
         (excess == NULL || count == 0 || *excess > 0)) {
    tes_page_t *next = page->next;
    if (excess != NULL) {
      size_t bytes = retired_bytes(page);
      *excess -= bytes < *excess ? bytes : *excess;
    }
    purge_list_remove(heap, page);
    if (force) page->purge_expire = stamp;
    count++;
    page = next;
  }
  tes_segment_purge_pages(first, count);
  return (size_t)count << seg->page_shift;
}

static size_t purge_first_run_locked(tes_heap_t *heap, int64_t now, bool force, size_t *excess, int64_t stamp) {
  return purge_run_locked(heap, heap->purge.first, now, force, excess, stamp, false, false);
}

/* Purge the pages due at `now` (all of them when force); purge_lock held. */
static void purge_expired_locked(tes_heap_t *heap, int64_t now, bool force) {
  while (heap->purge.first != NULL && (force || heap->purge.first->purge_expire <= now))
    purge_first_run_locked(heap, now, force, NULL, 0);
  purge_due_update(heap);
}

/* The heap is about to write a segment that holds nothing resident (fresh,
 * or purged in the cache): its retired pages still waiting for their purge
 * go first, oldest first, up to `bytes`. They are all of the other page
 * size (a free page of the size wanted would have been taken), so they
 * cannot serve this request, and waiting, they add to the new segment's
 * memory instead of making room for it: a program whose small blocks gave
 * way to medium ones held both for the purge delay. The pages carry their
 * purge time negated: one taken back within four purge delays holds this
 * purge off for a second (purge.c, tes_purge_growth_held), and the pages
 * wait for their timed purge instead. A program whose phases alternate
 * between small and medium blocks took every page back through a page
 * fault, phase after phase (traces-cmu-classic: 2,639 faults in the five
 * passes after the first, every one a page of this purge, 13% of the row's
 * time; peak RSS the same without it). The retake does not raise the purge
 * delay (that held footprint's memory: peak RSS 1.10x; PERFORMANCE.md,
 * twenty-fourth session, trace24). A large block about to be written in
 * fresh memory calls it too (large.c, purge_for_large_growth), with
 * carved_only: pages of any size may serve the program's next requests
 * there, so only those it carved and emptied go, not the dirty pages of a
 * segment it took from the cache a moment ago. The segment's purge spares
 * the pages growth_trim retired (page->trim_retired): in use a moment
 * before, held only by binned blocks or an empty head, they are the ones a
 * program whose phases alternate takes back first, each 4 KiB through a
 * fault, before any retake could hold this purge off (traces-cmu-classic:
 * 570 of its 7,700 faults; PERFORMANCE.md, twenty-seventh session, gp27;
 * lib.api_growth_trim_spare). They wait for their timed purge. The large
 * block's purge does not spare them (footprint's large phase, above).
 * purge_lock held. */
void tes_heap_purge_for_growth(tes_heap_t *heap, size_t bytes, bool carved_only) {
  if (heap->purge.first == NULL) return;
  int64_t now = tes_os_clock_ms();
  if (tes_purge_growth_held(now)) return; /* retaken soon: no purge ahead of time */
  size_t done = 0;
  for (tes_page_t *page = heap->purge.first; page != NULL && done < bytes;) {
    if ((carved_only && retired_carved(page) == 0) || (!carved_only && page->trim_retired)) {
      page = page->next;
      continue;
    }
    tes_page_t *before = page->prev; /* the run leaves the list after it */
    done += purge_run_locked(heap, page, 0, true, NULL, -now, carved_only, !carved_only);
    page = before != NULL ? before->next : heap->purge.first;
  }
  if (done != 0) tes_purge_note_growth(now, done);
  purge_due_update(heap);
}

/* With `wait` false (the owner's slow path, purge_due_at), a purge lock
 * found busy means another thread's sweep (tes_heaps_purge) is purging the
 * same due pages (the only other holder but fork's handler): the owner goes
 * on instead of waiting out the sweep's madvise calls (mstress/8t: up to
 * 138 sched_yield calls a run). */
static TES_NOINLINE void purge_expired(tes_heap_t *heap, int64_t now, bool force, bool wait) {
  if (wait) tes_lock(&heap->purge_lock);
  else if (!tes_trylock(&heap->purge_lock)) return;
  purge_expired_locked(heap, now, force);
  tes_unlock(&heap->purge_lock);
}

/* Called by segment.c, purge_lock held: a page of this heap left use (or
 * its segment is going), or a retired page is taken back. */
void tes_heap_purge_cancel(tes_heap_t *heap, tes_page_t *page) {
  if (page->purge_pending) {
    purge_list_remove(heap, page);
    purge_due_update(heap);
  }
}
void tes_heap_purge_schedule_pages(tes_heap_t *heap, tes_segment_t *seg, uint64_t mask) {
  if (mask == 0) return;
  int64_t now = tes_os_clock_ms();
  int64_t delay = tes_purge_delay(now);
  for (uint64_t m = mask; m != 0; m &= m - 1) {
    tes_page_t *page = &seg->pages[__builtin_ctzll(m)];
    if (delay <= 0) {
      tes_segment_purge_pages(page, 1);
      continue;
    }
    page->purge_expire = now + delay;
    page->purge_pending = 1;
    page->trim_retired = heap->growth_trimming;
    queue_push_back(&heap->purge, page);
  }
  if (delay <= 0) return;
  purge_due_update(heap);
  tes_purge_thread_notify();
}

void tes_heap_purge_schedule(tes_heap_t *heap, tes_page_t *page) {
  tes_heap_purge_schedule_pages(heap, tes_segment_of(page), (uint64_t)1 << page->index);
}

TES_INLINE void purge_due_at(tes_heap_t *heap, int64_t now) { /* a load and a test on the slow path */
  if (atomic_load_explicit(&heap->purge_due, memory_order_relaxed) <= now) purge_expired(heap, now, false, false);
}

/* The clock is read only when a purge is pending (inlined into the slow path). */
TES_INLINE void purge_due_if_pending(tes_heap_t *heap) {
  if (atomic_load_explicit(&heap->purge_due, memory_order_relaxed) != INT64_MAX)
    purge_due_at(heap, tes_os_clock_ms());
}

void tes_heap_purge_due(tes_heap_t *heap) { purge_due_if_pending(heap); }

/* Every heap's retired pages due at `now`, or all of them when force:
 * the purge thread's round, a sweep from some thread's slow path, and
 * tes_collect (malloc_trim) from any thread, which must reach the pages of
 * threads that are alive but idle. Unless forced, a heap whose owner holds
 * its lock is skipped (it is on its slow path and purges by itself).
 * Returns the earliest expiry still pending (INT64_MAX: none). */
static void kept_purge_locked(tes_heap_t *heap, int64_t now, bool force);

/* The earliest of a heap's pending purges: retired pages, and (hardened
 * build) kept pages its owner has left alone for a purge delay. */
static int64_t heap_purge_next(const tes_heap_t *heap) {
  int64_t due = atomic_load_explicit(&heap->purge_due, memory_order_relaxed);
  int64_t kept = atomic_load_explicit(&heap->kept_purge_due, memory_order_relaxed);
  return kept < due ? kept : due;
}

/* A walk of the heaps list (heaps lock held) works on one heap with the
 * lock let go: pinned, the heap keeps its place on the list (its release,
 * tes_heap_release_struct, waits), so the walk goes on from it. No system
 * call is made with the heaps lock held: every thread starting or exiting
 * (tes_heap_unpark, tes_heap_park, the heap structs) and every other sweep
 * spun and yielded on it while a sweep made its madvise calls
 * (mstress/8t's sched_yield calls; PERFORMANCE.md, twenty-fourth session). */
static TES_NOINLINE void heap_pin_unlock(tes_heap_t *heap) {
  heap->sweep_pins++;
  tes_unlock(&heaps_lock);
}
static TES_NOINLINE void heap_lock_unpin(tes_heap_t *heap) {
  tes_heaps_lock();
  heap->sweep_pins--;
}

int64_t tes_heaps_purge(int64_t now, bool force) {
  int64_t next = INT64_MAX;
  tes_heaps_lock();
  for (tes_heap_t *heap = tes_heaps_all; heap != NULL; heap = heap->all_next) {
    int64_t due = heap_purge_next(heap);
    if (force ? due != INT64_MAX : due <= now && tes_trylock(&heap->purge_lock)) {
      heap_pin_unlock(heap);
      if (force) tes_lock(&heap->purge_lock);
      purge_expired_locked(heap, now, force);
      kept_purge_locked(heap, now, force);
      tes_unlock(&heap->purge_lock); /* before the heaps lock: fork takes that one first */
      heap_lock_unpin(heap);
      due = heap_purge_next(heap);
    }
    if (due < next) next = due;
  }
  tes_unlock(&heaps_lock);
  return next;
}

/* From slow paths: other heaps' overdue pages, at most once per purge
 * delay process-wide, so that a thread that went idle gives its freed
 * pages back while any other thread still calls the allocator. */
static _Atomic int64_t sweep_next_ms;
static void sweep_other_heaps(int64_t now) {
  int64_t due = atomic_load_explicit(&sweep_next_ms, memory_order_relaxed);
  if (now < due) return;
  int64_t delay = tes_purge_delay(now);
  if (!atomic_compare_exchange_strong_explicit(&sweep_next_ms, &due, now + (delay > 0 ? delay : 1),
                                               memory_order_relaxed, memory_order_relaxed))
    return;
  /* Pages a purge delay overdue only: an owner that still takes slow
   * paths purges its own when they fall due (purge_due_at), and a sweep
   * that took its purge lock for them made it wait out the madvise calls
   * in page_release and fresh_page (mstress/8t: 41 sched_yield calls in
   * ten runs, 4 with this; PERFORMANCE.md, twenty-fourth session). The
   * purge thread and tes_collect still take every due page. */
  tes_heaps_purge(now - (delay > 0 ? delay : 0), false);
}

int64_t tes_heaps_purge_next(void) {
  int64_t next = INT64_MAX;
  tes_heaps_lock();
  for (tes_heap_t *heap = tes_heaps_all; heap != NULL; heap = heap->all_next) {
    int64_t due = heap_purge_next(heap);
    if (due < next) next = due;
  }
  tes_unlock(&heaps_lock);
  return next;
}

/* A page retired from this heap goes back to its segment (and may free the
 * segment, or schedule the page's purge). */
static void page_release(tes_heap_t *heap, tes_page_t *page) {
  tes_lock(&heap->purge_lock);
  tes_segment_page_free(heap, page);
  tes_unlock(&heap->purge_lock);
}

/* Kept empty pages (hardened build). A page whose last block the owner
 * frees is kept for one purge delay instead of retiring at once, up to
 * TES_KEEP_EMPTY_BYTES a heap: a program that frees a batch and allocates
 * the next gets the same pages back without carving them again, and
 * carving is the hardened build's dearest step (a shuffle and an encoded
 * link per block: 17% of bench_batch's instructions). A kept page hands its
 * blocks out in the order they were freed, as every partly used page does;
 * only fresh blocks are shuffled. The default build retires at once: it
 * carves in three instructions a block, and its bins absorb this churn
 * (keeping pages gained it nothing in bench_batch).
 *
 * Kept pages leave their class queue for the heap's kept list, which
 * changes only under purge_lock: the owner takes a page of the class back
 * from it (kept_take) before it asks its segments for a fresh one, and
 * retires what is left after the delay (retire_kept) or on a collect. An
 * owner that stops calling the allocator would keep them for good (4 MiB
 * an idle thread: 16 threads that freed 16 MiB each and idled kept 67 MiB
 * through malloc_trim), so another thread may give their memory back in
 * place, under the lock (kept_purge_locked): malloc_trim and tes_collect
 * (true) at once, the purge thread and other threads' sweeps once the
 * owner has left them alone a further purge delay. It cannot retire them:
 * the slice table and the segment lists are the owner's. A page purged so
 * stays on the list with empty lists and no carved block, marked purged,
 * and its owner carves it afresh (new keys) when it takes it back. No fast
 * path reaches a kept page: it is off the queues and the direct table, and
 * every block of it is free, so a free into it is a double or invalid free
 * (the slow path judges it: a purged page has no carved block). */
#define TES_KEEP_EMPTY_BYTES ((size_t)4 << 20)

#if TES_SECURE
static size_t page_bytes(const tes_page_t *page) { return (size_t)1 << tes_segment_of(page)->page_shift; }

static bool page_keep_empty(tes_heap_t *heap, tes_page_t *page) {
  size_t bytes = page_bytes(page);
  if (heap->kept_bytes + bytes > TES_KEEP_EMPTY_BYTES) return false;
  tes_heap_queue_remove(heap, page); /* not its queue's head: that one is pinned */
  /* A keeping window opens with the first page kept since the kept pages
   * last retired (the one clock read). */
  if (!heap->keep_open) {
    int64_t now = tes_os_clock_ms();
    int64_t delay = tes_purge_delay(now);
    if (delay < 0) delay = 0;
    heap->keep_open = true;
    heap->keep_restart = false;
    heap->keep_due = now + delay;
    heap->keep_purge_at = now + 2 * delay; /* others purge what the owner left alone one delay past its own retiring */
  }
  bool notify = false;
  tes_lock(&heap->purge_lock);
  if (atomic_load_explicit(&heap->kept_purge_due, memory_order_relaxed) == INT64_MAX) {
    atomic_store_explicit(&heap->kept_purge_due, heap->keep_purge_at, memory_order_relaxed);
    notify = true;
  }
  queue_push_back(&heap->kept[page->class_index], page);
  page->kept_empty = 1; /* under the lock: others write the bits beside it (purged, mem_zero) */
  tes_unlock(&heap->purge_lock);
  heap->kept_bytes += bytes;
  if (notify) tes_purge_thread_notify();
  return true;
}

/* The owner: the page of class c kept last (the warmest), at the end of
 * its class queue, or NULL. */
static tes_page_t *kept_take(tes_heap_t *heap, unsigned c) {
  tes_page_queue_t *q = &heap->kept[c];
  if (q->last == NULL) return NULL; /* only this thread changes the lists */
  bool carve = false;
  tes_lock(&heap->purge_lock);
  tes_page_t *page = q->last;
  queue_unlink(q, page);
  page->kept_empty = 0;
  heap->kept_bytes -= page_bytes(page);
  /* Every page kept was wanted again: the window starts again at its end
   * (retire_kept), with no clock read here. kept_purge_due stays: others
   * find nothing to purge, or what was kept since. */
  if (heap->kept_bytes == 0) heap->keep_restart = true;
  if (page->purged) {
    /* Given back by another thread: its lists were emptied, its blocks
     * are gone. Carved afresh, as a new page (segment state: the lock). */
    tes_heap_fold_page(heap, page, false);
    tes_page_settle_freeing(page); /* kept at the free of a delayed block: its freer's last store first */
    tes_page_init(page, tes_segment_of(page), c, page->block_size);
    carve = true;
  }
  tes_unlock(&heap->purge_lock);
  if (carve) tes_page_extend(page);
  else tes_page_collect(page);
  class_push_back(heap, page);
  return page;
}

/* The owner: every kept page retires, as it would have at its last free. */
static void kept_retire_all(tes_heap_t *heap) {
  if (heap->kept_bytes == 0) return;
  tes_lock(&heap->purge_lock);
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    for (tes_page_t *page; (page = heap->kept[c].first) != NULL;) {
      queue_unlink(&heap->kept[c], page);
      page->kept_empty = 0;
      tes_heap_fold_page(heap, page, false);
      tes_page_in_use_set(page, 0);
      page->in_full = 0;
      tes_segment_page_free(heap, page); /* may free the segment */
    }
  }
  atomic_store_explicit(&heap->kept_purge_due, INT64_MAX, memory_order_relaxed);
  tes_unlock(&heap->purge_lock);
  heap->kept_bytes = 0;
}

/* Due (slow path): the kept pages retire, and the window closes; but if
 * every kept page was taken back during the window, those kept now are
 * younger than a purge delay and get another window: a program that
 * empties and refills its pages batch after batch keeps them (retiring
 * them at every window's end re-carved them: under callgrind, where a
 * window spans few rounds, bench_batch's shuffles took 57 M instructions
 * that way, 22 M now). */
static void retire_kept(tes_heap_t *heap, int64_t now) {
  if (now < heap->keep_due) return;
  if (heap->keep_restart && heap->kept_bytes != 0) {
    int64_t delay = tes_purge_delay(now);
    if (delay < 0) delay = 0;
    heap->keep_restart = false;
    heap->keep_due = now + delay;
    heap->keep_purge_at = now + 2 * delay;
    tes_lock(&heap->purge_lock);
    atomic_store_explicit(&heap->kept_purge_due, heap->keep_purge_at, memory_order_relaxed);
    tes_unlock(&heap->purge_lock);
    tes_purge_thread_notify();
    return;
  }
  kept_retire_all(heap);
  heap->keep_open = false;
  heap->keep_restart = false;
}

/* Blocks on a page's free list, never leaving the page (a link overwritten
 * after its free ends the count). */
static uint32_t kept_free_count(const tes_page_t *page) {
  const uint8_t *lo = page->area, *hi = page->area + (size_t)page->reserved * page->block_size;
  uint32_t n = 0;
  for (const tes_block_t *b = page->free; b != NULL && n < page->capacity; b = tes_block_next(page, b)) {
    if ((const uint8_t *)b < lo || (const uint8_t *)b >= hi) break;
    n++;
  }
  return n;
}

/* Any thread, purge_lock held: give the memory of the heap's kept pages
 * back (all of them when forced, else once kept_purge_due has passed). A
 * page is emptied first (what it had on its free list leaves the blocks
 * ever installed, so the statistics still count its allocations), then
 * purged; its owner only ever reads it again under this lock. A page with
 * something its owner has to look at (a block on its remote stack, a
 * damaged link to report: invalid frees) is left to the owner. */
static void kept_purge_locked(tes_heap_t *heap, int64_t now, bool force) {
  int64_t due = atomic_load_explicit(&heap->kept_purge_due, memory_order_relaxed);
  if (due == INT64_MAX || (!force && due > now)) return;
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    for (tes_page_t *page = heap->kept[c].first; page != NULL; page = page->next) {
      if (page->purged || page->corrupt_link != NULL) continue;
      if (tes_tf_list(atomic_load_explicit(&page->xthread_free, memory_order_acquire)) != NULL) continue;
      page->installed -= kept_free_count(page);
      page->free = NULL;
      page->local_free = NULL;
      page->free_is_zero = 0;
      tes_page_capacity_set(page, 0); /* no block of it passes tes_secure_free_quick's capacity test */
      page->purge_expire = force ? 0 : now; /* for tes_purge_note_retake when it is carved again */
      tes_segment_purge_kept(page);
    }
  }
  atomic_store_explicit(&heap->kept_purge_due, INT64_MAX, memory_order_relaxed);
}
#else
static void kept_purge_locked(tes_heap_t *heap, int64_t now, bool force) { (void)heap, (void)now, (void)force; }
static tes_page_t *kept_take(tes_heap_t *heap, unsigned c) { (void)heap, (void)c; return NULL; }
static void kept_retire_all(tes_heap_t *heap) { (void)heap; }
#endif

#if TES_SECURE
/* An emptied page: kept (page_keep_empty), else retired (tes_heap_page_emptied,
 * and queues_sweep for one it left queued). */
static void page_emptied_keep(tes_heap_t *heap, tes_page_t *page) {
  if (!page_keep_empty(heap, page)) tes_heap_page_retire(heap, page);
}
#endif

/* A class head with no live block retires (true), unless a free comes in
 * first. */
static bool head_retire_if_empty(tes_heap_t *heap, tes_page_t *head) {
  if (!tes_page_take_if_empty(head)) return false;
  tes_heap_page_retire(heap, head);
  return true;
}

/* Queued pages (not heads; empty heads below) whose every live block other threads have
 * freed retire. Their blocks sat on the remote stacks until a malloc of
 * their class scanned them (find_page), never when the program stopped
 * using the class: a thread that allocated 100 MB of 256-byte blocks,
 * freed by another thread, kept it resident for good while it went on
 * allocating other sizes (fourteenth session, docs/RELIABILITY.md). A
 * load per queued page, once per purge delay. */
static void queues_sweep(tes_heap_t *heap) {
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    tes_page_t *head = heap->queues[c].first;
    if (head == NULL) {
      heap->idle_head[c] = NULL;
      continue;
    }
    for (tes_page_t *page = head->next, *next; page != NULL; page = next) {
      next = page->next;
#if TES_SECURE
      /* An empty page tes_heap_page_emptied left behind its class's head
       * (used 0: a queued page is unpinned) is kept now, as an emptied
       * page is (retired when the kept pages are full). */
      if (page->used == 0) {
        if (tes_page_take_if_empty(page)) page_emptied_keep(heap, page);
        continue;
      }
#endif
#if TES_SECURE
      /* Also a page with no summary bit set that has had a remote free
       * (remote_last): a freer's bit set after a collect took its summary
       * bit has none of its own (free.c), and when no other free into its
       * words comes, only this look (tes_page_take_if_empty reads every
       * word) finds it (rev25: before, such a page stayed until a trim or
       * the thread's exit). */
      if ((tes_tf_list(atomic_load_explicit(&page->xthread_free, memory_order_relaxed)) != NULL ||
           atomic_load_explicit(&page->remote_last, memory_order_relaxed) != 0) &&
          tes_page_take_if_empty(page))
        tes_heap_page_retire(heap, page);
#else
      if (tes_tf_list(atomic_load_explicit(&page->xthread_free, memory_order_relaxed)) != NULL &&
          tes_page_take_if_empty(page))
        tes_heap_page_retire(heap, page);
#endif
    }
    /* A head found empty at two sweeps in a row (a purge delay apart)
     * retires too: it stayed its class's head for good, written and
     * resident, when the program stopped using the class (up to 512 KiB a
     * medium class), until a malloc_trim. One look was not enough: heads of
     * classes in use, empty at that moment, retired and were carved again
     * (traces-cmu-classic: 250 more page faults). Nor were two: a class
     * whose every malloc is freed before the next (a hardened ping-pong,
     * no bins) is empty at each sweep; so a slow path of the class between
     * the two looks (find_page) clears the mark. A class used again takes
     * a page back, this one while it waits dirty. */
    bool empty = tes_page_live(head) == 0;
    if (empty && heap->idle_head[c] == head && head_retire_if_empty(heap, head)) empty = false;
    heap->idle_head[c] = empty ? head : NULL;
  }
}

/* The heap has no free page of this kind left and is about to take a new
 * segment: first every other class lets go of what it holds idle. The
 * blocks in its bin go back to their pages, and its head retires if it is
 * empty; the pages that empty retire, and a page of the kind wanted among
 * them is taken instead of a new segment (those of the other kind are
 * purged first when the segment is new memory: tes_heap_purge_for_growth).
 * Otherwise a bin or a head held its pages until the next flush and two
 * queue sweeps (a purge delay or more): a program that moved from some
 * size classes to others kept a page of each class it left for every block
 * in its bin, resident (up to 512 KiB a medium page: traces-cmu-classic
 * held pages of 28 KiB blocks with one to three in a bin each, 33 MB peak
 * RSS against glibc's 21; PERFORMANCE.md, nineteenth session). Class c's
 * bin and head stay: the caller is about to use them. Done at every page
 * the heap takes with no resident free page of its kind left, it cost
 * memory instead: the heads and bins of classes still in use let go and
 * were carved again elsewhere, touching more of the pages (bench_realloc
 * 2.76 -> 3.33 MB, bench_aligned 11.0 -> 12.4 MB). Once a segment. */
static void growth_trim(tes_heap_t *heap, unsigned c) {
  heap->growth_trimming = true; /* the pages retired here: the growth purge spares them */
  for (unsigned k = 0; k < TES_CLASS_COUNT; k++) {
    if (k == c) continue;
    class_bin_flush(heap, k);
    tes_page_t *head = heap->queues[k].first;
    if (head != NULL && tes_page_live(head) == 0 && head_retire_if_empty(heap, head)) heap->idle_head[k] = NULL;
  }
  heap->growth_trimming = false;
}

/* Parked heaps (below, tes_heap_park): newest first, under heaps_lock. */
static tes_heap_t *parked_heaps;
static unsigned parked_count;
#define TES_PARKED_MAX 16
/* A look without the lock (nothing to do, one load, on the common path). */
static inline bool parked_any(void) { return __atomic_load_n(&parked_heaps, __ATOMIC_RELAXED) != NULL; }

/* heap_deferred's work of every eighth slow call: cached large spans and
 * other heaps' due purges, and one segment of an exited thread; once per
 * purge delay, the queued pages other threads emptied; in the hardened
 * build, while pages are kept, their window and this heap's due purges.
 * Out of line: the seven calls between pay only the count. */
static TES_NOINLINE void heap_deferred_eighth(tes_heap_t *heap) {
  tes_cache_purge(false);
  int64_t now = tes_os_clock_ms();
#if TES_SECURE
  if (heap->keep_open) { /* heap_deferred leaves these to this clock read */
    if (now >= heap->keep_due) retire_kept(heap, now);
    purge_due_at(heap, now);
  }
  /* The hardened bins go back to their pages once per purge delay, as the
   * default build's do in heap_deferred (here: one clock read in eight
   * slow paths, which the hardened build's heap_deferred otherwise skips). */
  if (now >= heap->bins_due) {
    bins_flush(heap);
    heap->bins_due = now + tes_purge_delay(now);
  }
#endif
  sweep_other_heaps(now);
  if (parked_any()) tes_heap_abandon_parked(now - tes_purge_delay(now), UINT32_MAX);
  if (now >= heap->queues_sweep_due) {
    int64_t delay = tes_purge_delay(now);
    heap->queues_sweep_due = now + (delay > 0 ? delay : 1);
    queues_sweep(heap);
  }
  /* One segment of an exited thread, whether or not a page is wanted:
   * adopting frees its pages that other threads have emptied since
   * (fresh_page adopts only when this heap needs a page, and under thread
   * churn with hand-offs the abandoned segments piled up faster). */
  tes_segment_t *seg = heap->is_default ? tes_abandoned_pop() : NULL;
  if (seg != NULL) {
    tes_heap_adopt_segment(heap, seg);
    tes_stats_heap_reclaimed();
  }
}

/* Work deferred to slow paths: remote frees into full pages, due purges,
 * and once per purge delay the bins: a block left in a bin keeps its page in
 * use, so a class the program stopped using would pin a page for good
 * (a 512 KiB one for a medium class) instead of letting it retire and be
 * purged. The busy bins refill at once. Inlined into the malloc slow path:
 * each check is a load and a test, and calls out only when there is work
 * (as a call of its own, with the purge thread's and the purge's checks
 * called too, it was 54 instructions of a 281-instruction slow path in the
 * hardened fit-small row). */
TES_INLINE void heap_deferred(tes_heap_t *heap) {
  if (atomic_load_explicit(&heap->delayed_free, memory_order_relaxed) != NULL) tes_heap_process_delayed(heap);
  if (atomic_load_explicit(&heap->first_class_deleted, memory_order_relaxed) != 0 && heap->is_default)
    tes_heap_process_deletes(heap);
#if !TES_SECURE
  int64_t now = tes_os_clock_ms(); /* one clock read for the bins and the purges */
  if (now >= heap->bins_due) {
    bins_flush(heap);
    heap->bins_due = now + tes_purge_delay(now);
  }
  purge_due_at(heap, now);
#else
  /* While kept pages wait (keep_open), their window and the due purges are
   * looked at with the clock heap_deferred_eighth reads anyway, one slow
   * call in eight: read here, the clock was 25 of every slow call's
   * instructions (twenty-first session). */
  if (!heap->keep_open) purge_due_if_pending(heap);
#endif
  if ((++heap->slow_count & 7) == 0) heap_deferred_eighth(heap);
  /* Last: it may allocate (pthread_create), re-entering this path. */
  if (tes_unlikely(tes_opt(TES_OPTION_PURGE_THREAD))) tes_purge_thread_start();
}

#if !TES_SECURE
/* A free found bin's room at zero with room borrowed by the drift, 256
 * pops or more counted (alloc_inline.h, tes_free_owned_to): the bin may
 * not be full, its room ran out (internal.h,
 * TES_BIN_POP: about once in 256 pops a block of room, so in a loop of one
 * block's pairs and a bin of 64, once in 16,000 pairs). The pops go to the
 * heap's counters and the room is limit - held again; at every call while
 * bins are grown, at one call in TES_ROOM_OUT_CLOCK otherwise, the clock
 * is read and, once per purge delay, this runs the work a malloc slow path
 * would (the bins' flush, the queue sweep, the purges), which a loop whose
 * blocks all fit its bins never reaches (PERFORMANCE.md, twenty-second
 * session; RELIABILITY.md, twenty-fourth). Then the block goes into the
 * bin, as the fast path's push, or to its page when the bin is full. */
__attribute__((cold)) void tes_bin_room_out(tes_page_t *page, tes_bin_t *bin, tes_block_t *block) {
  tes_heap_t *heap = atomic_load_explicit(&page->heap, memory_order_relaxed);
  if (tes_unlikely(bin < heap->bins || bin >= heap->bins + TES_CLASS_COUNT)) { /* not a heap's bin: counts no pops */
    tes_page_push_local(page, block);
    return;
  }
  bin_fold_one(heap, (unsigned)(bin - heap->bins), false); /* the room is limit - held: zero when full */
  /* The clock at every call while bins are grown past their limits
   * (bin_grow), else at one call in TES_ROOM_OUT_CLOCK. With no bin grown
   * it was never read until the twenty-fourth session: once the first
   * flush had set grown limits back, a loop that fits its bins ran no
   * deferred work again (lib.api_full_bin_rss: idle medium heads resident
   * for good, review23). Read at every call, the clock and the work once
   * per purge delay cost 0.10-0.15 instructions a pair in fastpath.sh's
   * ping-pong under callgrind (budget 44, at 44.0), nearly all of it
   * bins_flush (6,700 instructions each then, 2,660 of them working out
   * the limits; a table and a skip of untouched bins since, the
   * twenty-fifth session) of the bins the warm-up left. At one call in 64
   * the budget's runs (6 and 12 calls) read no clock; 2 M pairs 44.012 against 44.008. A call comes
   * at most once in 256 pops of a bin (a ping-pong's bin of 64: once in
   * 16,384 pairs), so the work runs at most 64 calls (some 1 M pops, a few
   * ms at such a loop's speed) after it fell due. */
  int64_t now = heap->bins_grown != 0 || ++heap->room_outs % TES_ROOM_OUT_CLOCK == 0 ? tes_os_clock_ms() : INT64_MIN;
  if (now >= heap->bins_due) {
    bins_flush(heap);
    heap->bins_due = now + tes_purge_delay(now);
    purge_due_at(heap, now);
    heap_deferred_eighth(heap);
  }
  /* The free again, from the top (a few instructions more, once in about
   * 256 pops a unit of room; an inlined tes_free_owned_to took the library
   * past lib.fixed_cost_sizes' 17 pages): the fast path's push, or (full,
   * bins off since) its page's way. The pops are folded, so it does not
   * come back here. */
  tes_free_slow(block);
}
#endif

/* ---- retire / full / unfull ---------------------------------------------------- */
void tes_heap_page_retire(tes_heap_t *heap, tes_page_t *page) {
  tes_heap_queue_remove(heap, page);
  tes_heap_fold_page(heap, page, false);
  tes_page_in_use_set(page, 0);
  page->in_full = 0;
  page_release(heap, page);
}

/* The owner freed the last block of a page that is not in the full queue.
 * Hardened: a small class's page that is the only one behind its class's
 * head stays where it is, empty (its frees on local_free), until the head
 * runs dry and rotates to it (miss_rotate), a queue sweep a purge delay
 * later finds it still empty and keeps it as below (queues_sweep: retiring
 * it there re-carved bench_batch's pages, +5% of its instructions under
 * callgrind), or a collect retires it. cpe357's two
 * pages: one emptied every round, kept, and taken back through the
 * generic path the next round (page_keep_empty, kept_take, the dry head to
 * the full queue and back: ~500 instructions a round, a third of the
 * row's misses); it now rotates. At most one such page a class. */
void tes_heap_page_emptied(tes_heap_t *heap, tes_page_t *page) {
#if TES_SECURE
  tes_page_t *head = page->prev;
  if (page->next == NULL && head != NULL && head->prev == NULL && page->block_size <= TES_SMALL_BLOCK_MAX)
    return;
  page_emptied_keep(heap, page);
#else
  tes_heap_page_retire(heap, page);
#endif
}

/* A page with no free block: watch it through the delayed list instead of
 * scanning it. Returns false if a remote free slipped in (page stays).
 *
 * The USE_DELAYED tag is not taken back when the page leaves the full queue
 * (tes_heap_page_unfull): a page that fills up once usually fills up again,
 * and with many pages of one to four free blocks (medium classes, large
 * working sets) every malloc moved a page to full and every free moved one
 * back, each with a CAS. A remote free into a page still tagged simply goes
 * through the delayed list once, and that remote freer sets the tag back to
 * NORMAL itself (tes_free_remote). So here the tag is often already set; if
 * a remote freer has reset it since, it has a block on its way through the
 * delayed list, which only this thread drains, after the page is in the
 * full queue: that block brings the page back. Inlined into find_page, as
 * the capacity test before tes_page_extend there: fit-large's slow path
 * moves a page here nearly every time. */
TES_INLINE bool page_to_full(tes_heap_t *heap, tes_page_t *page) {
  uintptr_t tf = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
  if ((tf & TES_TF_MASK) != TES_TF_USE_DELAYED) {
    tes_page_set_delayed(page, TES_TF_USE_DELAYED);
    tf = atomic_load_explicit(&page->xthread_free, memory_order_acquire);
  }
  if (tes_tf_list(tf) != NULL) return false; /* collect it first; the tag may stay */
  /* find_page moves only its class queue's head here: unlinked as a head,
   * without tes_heap_queue_remove's general case (and its unpin: used is
   * set below). */
  unsigned c = page->class_index;
  tes_page_queue_t *q = &heap->queues[c];
  if (tes_likely(q->first == page)) {
    q->first = page->next;
    if (q->first != NULL) q->first->prev = NULL;
    else q->last = NULL;
    page->pinned = 0;
    class_head_changed(heap, c);
  } else {
    tes_heap_queue_remove(heap, page); /* defensive */
  }
  page->in_full = 1;
  page->used = 1; /* trigger (used == live == reserved): the owner's next free into it calls out */
  queue_push_back(&heap->full, page);
  return true;
}

/* tes_heap_page_unfull of a page whose one block came back: out of line,
 * so that the common case saves no registers. */
static TES_NOINLINE void page_unfull_empty(tes_heap_t *heap, tes_page_t *page) {
  tes_page_in_use_set(page, 0);
  tes_heap_fold_page(heap, page, false);
  page_release(heap, page);
}

/* The owner freed a block into a full page (used went 1 -> 0). The
 * delayed-free tag stays (see page_to_full). */
void tes_heap_page_unfull(tes_heap_t *heap, tes_page_t *page) {
  queue_unlink(&heap->full, page);
  page->in_full = 0;
  page->used = page->reserved - 1;
  if (tes_unlikely(page->used == 0)) {
    page_unfull_empty(heap, page);
    return;
  }
  class_push_back(heap, page);
}

#if TES_SECURE
/* A delayed-list link, decoded with the heap's keys (remote freers push
 * with a CAS on the heap's list, across pages): one the program wrote over
 * after the block's free decodes to a wild address and must end the list,
 * reported, as a page's links do (tes_block_next_checked), not send the
 * owner there (SIGSEGV on its next slow path). A link passes when it is a
 * carved block start of a page in use of this heap (a forged one needs
 * both keys, and then still has to pass this). */
static bool delayed_link_ok(const tes_heap_t *heap, const tes_block_t *block, const tes_block_t *next) {
  if (next == NULL) return true;
  if (next == block || !tes_maybe_small_block(next)) return false; /* a self-link (node->next = node) is a cycle */
  tes_page_t *page = tes_page_of(tes_segment_of(next), next);
  size_t index;
  return tes_page_in_use_any_thread(page) && atomic_load_explicit(&page->heap, memory_order_relaxed) == heap &&
         tes_secure_block_index(page, next, &index) && index < page->capacity;
}
#endif

void tes_heap_process_delayed(tes_heap_t *heap) {
  tes_block_t *block = atomic_exchange_explicit(&heap->delayed_free, NULL, memory_order_acquire);
#if TES_SECURE
  bool linked = false; /* block was reached through a link, not the list's head */
#endif
  while (block != NULL) {
    tes_block_t *next = tes_delayed_decode(heap, block->next);
    tes_segment_t *seg = tes_segment_of(block);
    tes_page_t *page = tes_page_of(seg, block);
#if TES_SECURE
    /* Freed by the owner too at the same moment (tes_secure_remote_block_ok
     * reports it): the owner's free counted it and put it on the page's
     * local list, over its link here, so the list ends at it; the blocks
     * after it are lost, never handed out twice. */
    if (tes_unlikely(!tes_secure_remote_block_ok(page, block, false))) break;
    if (tes_unlikely(!delayed_link_ok(heap, block, next))) {
      tes_report_error(TES_ERR_CORRUPT, block, page); /* the blocks after it are lost, never handed out twice */
      /* A block reached through a link whose own link is bad may be one
       * this walk freed already (a forged link back to an earlier block,
       * the head too: its link is now the page's encoded one), or one on a
       * page's free list: freed again, it was handed out twice. Lost too. */
      if (linked) break;
      next = NULL;
    }
    linked = true;
#endif
#if !TES_SECURE
    /* A block its owner freed again after another thread's free had put it
     * here: its second word is now its bin's mark (or the program's data,
     * once handed out), its first word a bin's or page's link, not a
     * delayed one, which decoded to a wild address: SIGSEGV on the next
     * step (security.default_continue_after_double_free_delayed_owner). The
     * list ends before it, reported: it is in the owner's bin or on its
     * page's list already, and the blocks after it are lost (their pages
     * keep counting them), never handed out twice. The line is the one the
     * link is read from. */
    if (tes_unlikely(*tes_bin_mark(block) != tes_delayed_mark(page))) {
      tes_report_error(TES_ERR_BIN_DAMAGED, block, page);
      break;
    }
    *tes_bin_mark(block) = 0; /* off the delayed list (tes_delayed_mark) */
#endif
    heap->counters.delayed_processed++;
    tes_free_local_block(page, block);
    block = next;
  }
}

/* ---- the malloc slow path ---------------------------------------------------- */
/* A new page of class c for the heap; NULL when out of memory, or (with
 * *rescan set) when adopting abandoned segments brought pages of class c,
 * which the caller scans first. */
static tes_page_t *fresh_page(tes_heap_t *heap, unsigned c, bool adopt, bool *rescan) {
  size_t bs = tes_class_size(c);
  tes_segment_kind_t kind = bs <= TES_SMALL_BLOCK_MAX ? TES_SEG_SMALL : TES_SEG_MEDIUM;
  /* Reuse memory of exited threads before carving more pages, even when this
   * heap still has free segments of its own: an abandoned segment has no
   * owner to collect its remote frees or purge it, so until someone adopts
   * it, whatever it holds stays resident. Only a thread's default heap
   * adopts: the segment still holds the exited thread's live blocks, and
   * tes_heap_destroy of a first-class heap returns its segments whole. */
  *rescan = false;
  /* A parked heap (tes_heap_park) keeps an exited thread's memory for the
   * next new thread; a live thread about to map a new segment takes the
   * oldest first (its segments go to the abandoned list, adopted below),
   * as if it had been abandoned at the exit: 64 MiB an exited thread handed
   * over, freed and allocated again was mapped anew (lib.api_rss,
   * thread_exit mode: 64 MiB more resident). */
  if (adopt && heap->is_default && heap->free_segments[kind] == NULL && parked_any())
    tes_heap_abandon_parked(INT64_MAX, 1);
  for (int tries = 0; adopt && heap->is_default && tries < 2; tries++) {
    tes_segment_t *seg = tes_abandoned_pop();
    if (seg == NULL) break;
    tes_heap_adopt_segment(heap, seg);
    tes_stats_heap_reclaimed();
    if (heap->queues[c].first != NULL) {
      *rescan = true;
      return NULL;
    }
  }
  if (heap->free_segments[kind] == NULL) growth_trim(heap, c);
  tes_lock(&heap->purge_lock);
  tes_page_t *page = tes_segment_page_alloc(heap, kind);
  if (page != NULL) tes_page_init(page, tes_segment_of(page), c, bs);
  tes_unlock(&heap->purge_lock);
  if (page == NULL) return NULL;
  atomic_store_explicit(&page->heap, heap, memory_order_release);
  tes_segment_page_bin(heap, page, &heap->bins[c]);
  tes_page_extend(page);
  class_push_back(heap, page);
  return page;
}

/* A page of class c with a free block, at the head of its queue; NULL = OOM.
 * The first rounds may adopt abandoned segments; the last one only carves a
 * page of our own, so pages of class c that arrive full with adopted
 * segments cannot make a malloc fail while memory is left (before, four
 * rounds of adoptions that brought only full pages returned NULL: 1 run in
 * 20 of larson with 8 threads). Inlined into its two callers: the call
 * and the registers it saved were 22 instructions of every slow-path
 * malloc (1.6 KB more code). */
#define FIND_PAGE_ADOPT_ROUNDS 4
TES_INLINE tes_page_t *find_page(tes_heap_t *heap, unsigned c) {
  heap->idle_head[c] = NULL; /* the class is in use: its head is not idle (queues_sweep) */
  for (int round = 0;; round++) {
    tes_page_t *page = heap->queues[c].first;
    while (page != NULL) {
      tes_page_collect_quick(page);
      if (page->free != NULL || (page->capacity < page->reserved && tes_page_extend(page))) {
        if (page != heap->queues[c].first) { /* defensive: make it the head */
          tes_heap_queue_remove(heap, page);
          tes_page_t *old = heap->queues[c].first;
          if (old && old->pinned) {
            old->pinned = 0;
            old->used--;
          }
          page->next = heap->queues[c].first;
          page->prev = NULL;
          if (heap->queues[c].first) heap->queues[c].first->prev = page;
          else heap->queues[c].last = page;
          heap->queues[c].first = page;
          class_head_changed(heap, c);
        }
        return page;
      }
      tes_page_t *next = page->next;
      /* The last page of the queue goes full: a kept page queues behind
       * it first, so the head moves once (not to nothing and back). */
      if (next == NULL) next = kept_take(heap, c);
      if (!page_to_full(heap, page)) continue; /* retry this page */
      page = next;
    }
    page = kept_take(heap, c);
    if (page != NULL) {
      if (page->free != NULL) return page;
      continue; /* defensive: rescan the queue */
    }
    bool rescan;
    page = fresh_page(heap, c, round < FIND_PAGE_ADOPT_ROUNDS, &rescan);
    if (page != NULL || !rescan) return page; /* a new page, or out of memory */
  }
}

/* Hand out the first free block of page (NULL page: out of memory), zeroed
 * when asked unless the page knows its free blocks are still zero. Inlined
 * (the hardened build called it: 13 of the slow path's instructions in
 * fit-small were that call's). */
/* kind: TES_KIND_* of the page (its link's and size word's places, hardened build). */
TES_INLINE void *page_take_block_kind(tes_heap_t *heap, tes_page_t *page, size_t requested, bool zero, unsigned kind) {
  if (tes_unlikely(page == NULL)) {
    heap->counters.malloc_failed++;
    errno = ENOMEM;
    return NULL;
  }
  tes_block_t *block = tes_page_take_in(page, kind);
  if (zero) {
    if (page->free_is_zero) tes_block_link_slot_in(page, block, kind)->next = NULL; /* the only word not zero */
    else memset(block, 0, page->block_size);
  }
  tes_block_arm_in(page, block, requested, kind);
  return block;
}
TES_INLINE void *page_take_block(tes_heap_t *heap, tes_page_t *page, size_t requested, bool zero) {
  return page_take_block_kind(heap, page, requested, zero, TES_KIND_ANY);
}

void *tes_heap_malloc_generic(tes_heap_t *heap, size_t size, bool zero) {
  if (tes_unlikely(heap->is_static)) {
    heap = tes_thread_heap_init();
    if (heap == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  if (size > TES_MEDIUM_BLOCK_MAX) return tes_large_alloc(heap, size, 0, zero);
#if TES_SECURE
  size_t requested = size;
  size += TES_PADDING;
  if (size > TES_MEDIUM_BLOCK_MAX) return tes_large_alloc(heap, requested, 0, zero);
#endif
  unsigned c = tes_class_of(size);
  tes_page_t *page = heap->queues[c].first;
  if (page == NULL || page->free == NULL) {
    /* Out of blocks at the head of the class: the real slow path. */
#if !TES_SECURE
    tes_bin_t *bin = &heap->bins[c];
    if (page != NULL && page->local_free != NULL && bin->limit < bin->most && bin->head == TES_BIN_END)
      bin_grow(heap, bin, c);
#endif
    heap_deferred(heap);
    page = find_page(heap, c);
    if (page != NULL) heap->counters.slow_allocs++; /* a failure is no miss (fast_path_hits) */
  }
#if TES_SECURE
  return page_take_block(heap, page, requested, zero);
#else
  return page_take_block(heap, page, size, zero);
#endif
}

#if TES_SECURE
/* The hardened malloc's fast path found no free block on the page it pops
 * from (the default build calls tes_heap_malloc_generic: see internal.h).
 * The commonest case in a program that frees what it allocates: that page
 * (its class's head) ran dry while its owner's frees wait on local_free.
 * The slow path's first step would make them the free list (find_page,
 * before any carving), and heap_deferred would find nothing due, at ~145
 * instructions a call (bench_threads: 63,500 such calls in 1.9 M mallocs,
 * 4.7% of the run). Here the list moves at once (~60), without touching
 * the fast path. The page goes the long way when a remote stack waits or a
 * cut link is to be reported, both of which tes_page_collect handles.
 * Every eighth refill runs heap_deferred's work first (delayed frees,
 * timed purges, the kept pages' window: miss_deferred). */
#ifndef TES_ROTATE_FEW
#define TES_ROTATE_FEW 8
#endif
#ifndef TES_ROTATE_GAIN
#define TES_ROTATE_GAIN 2
#endif
/* Nothing for tes_page_collect to do on the page (no cut link to report,
 * no remote stack): tes_page_collect_quick's test. */
TES_INLINE bool miss_collect_quick_ok(const tes_page_t *page) {
  return page->corrupt_link == NULL &&
         tes_tf_list(atomic_load_explicit(&page->xthread_free, memory_order_relaxed)) == NULL;
}

/* The page (the fast path's, or its class's head again) is its class's
 * head with an empty free list, frees on local_free, and nothing for
 * tes_page_collect to do (no remote stack, no cut link to report). */
TES_INLINE bool miss_quick_ok(const tes_page_t *page) {
  return page != NULL && page->free == NULL && page->local_free != NULL && miss_collect_quick_ok(page);
}

/* miss_rotate's new head with a remote stack or a cut link: collected the
 * long way, out of miss_rotate (whose common path then calls nothing and
 * saves no registers). */
static TES_NOINLINE void *miss_rotate_collect(size_t size, tes_heap_t *heap, tes_page_t *page) {
  tes_page_collect(page);
  if (tes_unlikely(page->free == NULL)) return tes_heap_malloc_generic(heap, size, false); /* a link cut */
  heap->counters.slow_allocs++;
  return page_take_block(heap, page, size, false);
}

/* A small class's head that holds TES_ROTATE_FEW blocks or fewer on
 * local_free (`mine` of them) would refill with those few and run dry
 * again at once (fit-small: half the refills took one block, each a miss
 * of ~100 instructions, and the next one moved the page to the full
 * queue, which the next free into it took back: 34,500 round trips). When
 * its successor holds more, the head goes to the back of its class queue
 * instead, keeping its frees (a free into it stays a plain push), and the
 * successor, collected, becomes the head and serves: the same lists, the
 * same hold-back of a page's block freed last (tes_page_free_from_local),
 * only which page serves next changes (the next page must hold more than
 * TES_ROTATE_GAIN times the head's few, or the move does not pay: fit-small
 * 95.0 M instructions with 8 and 2, 95.8 M with 4 and 1). Else the head
 * refills as usual.
 * Out of line and a tail call: the miss's common path saves no more
 * registers. */
static TES_NOINLINE void *miss_rotate(size_t size, tes_heap_t *heap, tes_page_t *page, uint32_t mine) {
  unsigned c = page->class_index;
  tes_page_queue_t *q = &heap->queues[c];
  tes_page_t *next = page->next;
  /* Only a head with live blocks: unpinned, an empty one would sit in
   * the queue with `used` 0, never retired by a free. */
  if (next->capacity - next->used > mine * TES_ROTATE_GAIN && page->used > 1 &&
      tes_likely(q->first == page && page->pinned)) {
    q->first = next;
    next->prev = NULL;
    page->next = NULL;
    page->prev = q->last;
    q->last->next = page;
    q->last = page;
    page->pinned = 0;
    page->used--;
    /* class_head_changed with the new head known: pinned, the direct
     * entries set in line (the call was 30 instructions a rotation). */
    pin(next);
    if (c < DIRECT_CLASSES) direct_set(heap, c, next);
    if (tes_unlikely(!miss_collect_quick_ok(next))) return miss_rotate_collect(size, heap, next);
    page = next;
  }
  /* Either page, its class's head (a small class's): as
   * tes_page_collect_quick, inlined once. */
  tes_page_free_from_local_kind(page, true, TES_KIND_SMALL);
  if (tes_unlikely(page->free == NULL)) return tes_heap_malloc_generic(heap, size, false); /* nothing to serve */
  heap->counters.slow_allocs++;
  return page_take_block_kind(heap, page, size, false, TES_KIND_SMALL);
}

/* miss_refill of a medium class's head. Out of line and a tail call: in
 * line, its registers were saved on every small refill too (96.5 -> 100.9
 * instructions a miss, security.refill_budget). */
static TES_NOINLINE void *miss_refill_medium(size_t size, tes_heap_t *heap, tes_page_t *page) {
  tes_page_free_from_local_kind(page, true, TES_KIND_MEDIUM);
  heap->counters.slow_allocs++;
  return page_take_block_kind(heap, page, size, false, TES_KIND_MEDIUM);
}

/* The refill of a page miss_quick_ok accepts. */
TES_INLINE void *miss_refill(size_t size, tes_heap_t *heap, tes_page_t *page) {
  heap->idle_head[page->class_index] = NULL; /* as find_page: the class is in use */
  /* The kind known once: the links' and size words' places below take no
   * compare of the block size (hardened: a medium block's link is at its
   * end, tes_block_link_slot_in). */
  if (page->block_size <= TES_SMALL_BLOCK_MAX) {
    if (page->next != NULL) {
      /* The blocks on local_free: the head is pinned (used is one more than
       * its live blocks), not full, and its free list is empty. */
      uint32_t mine = page->capacity + 1 - page->used;
      if (mine <= TES_ROTATE_FEW) return miss_rotate(size, heap, page, mine);
    }
    tes_page_free_from_local_kind(page, true, TES_KIND_SMALL); /* a class's head */
    heap->counters.slow_allocs++;
    return page_take_block_kind(heap, page, size, false, TES_KIND_SMALL);
  }
  return miss_refill_medium(size, heap, page);
}

/* Every eighth refill: heap_deferred's work, then the class's head (which
 * that work may have changed) refilled the same way, or the generic path
 * (which runs heap_deferred once more: rare). Until the twenty-first
 * session such a call went the generic path whole (~220 instructions
 * against ~100). */
static TES_NOINLINE void *miss_deferred(size_t size, tes_heap_t *heap, tes_page_t *page) {
  unsigned c = page->class_index;
  heap_deferred(heap);
  page = heap->queues[c].first;
  if (miss_quick_ok(page)) return miss_refill(size, heap, page);
  return tes_heap_malloc_generic(heap, size, false);
}

void *tes_heap_malloc_miss(size_t size, tes_heap_t *heap, tes_page_t *page) {
  if (miss_quick_ok(page)) {
    if (tes_likely((++heap->quick_refills & 7) != 0)) return miss_refill(size, heap, page);
    return miss_deferred(size, heap, page);
  }
  return tes_heap_malloc_generic(heap, size, false);
}
#endif

/* Aligned small/medium allocation: a class whose block size is a multiple of
 * the alignment, in a page whose block area is page-aligned, yields aligned
 * blocks with no over-allocation and no interior pointers. */
void *tes_heap_malloc_aligned(tes_heap_t *heap, size_t size, size_t alignment, bool zero) {
  if (tes_unlikely(heap->is_static)) {
    heap = tes_thread_heap_init();
    if (heap == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  size_t need = size + TES_PADDING;
  if (need < alignment) need = alignment;
  if (need <= TES_MEDIUM_BLOCK_MAX && alignment <= TES_MEDIUM_BLOCK_MAX) {
    unsigned c = tes_class_of(need);
    /* alignment is a power of two (aligned_in's callers check it). */
    while (c < TES_CLASS_COUNT && (tes_class_size(c) & (alignment - 1)) != 0) c++;
    if (c < TES_CLASS_COUNT) {
      /* As tes_heap_malloc_generic: the head page of the class when it has
       * a block (every page of the class serves the alignment), else the
       * slow path. */
      tes_page_t *page = heap->queues[c].first;
      if (page == NULL || page->free == NULL) {
        heap_deferred(heap);
        page = find_page(heap, c);
        if (page != NULL) heap->counters.slow_allocs++;
      }
      return page_take_block(heap, page, size, zero);
    }
  }
  return tes_large_alloc(heap, size, alignment, zero);
}

/* ---- collection -------------------------------------------------------------- */
/* every: each page's remote frees are collected (tes_collect, malloc_trim);
 * else only the pages they empty are (thread exit: the others go to the
 * abandoned list as they are, with no walk of their remote stacks). */
static void heap_collect_pages(tes_heap_t *heap, bool every, bool park) {
  if (park) bins_park(heap);
  else bins_flush(heap);
  tes_heap_process_delayed(heap);
  kept_retire_all(heap);
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    tes_page_t *page = heap->queues[c].first;
    while (page != NULL) {
      tes_page_t *next = page->next;
      if (every) tes_page_collect(page);
      if (tes_page_take_if_empty(page)) tes_heap_page_retire(heap, page);
      page = next;
    }
  }
}

static void heap_collect(tes_heap_t *heap, bool force, bool every, bool park) {
  if (heap->is_static) return;
  heap_collect_pages(heap, every, park);
  purge_expired(heap, tes_os_clock_ms(), force, true);
}

void tes_heap_collect(tes_heap_t *heap, bool force) { heap_collect(heap, force, true, false); }

/* tes_collect from a thread: its first-class heaps too (only it may touch
 * them). Their pages that other threads emptied waited on remote stacks
 * and the delayed list for an allocation from that heap, so a heap the
 * program kept but stopped using held them through malloc_trim for good
 * (200,000 blocks of 256 B freed by another thread: 52 MB). Each is
 * collected pinned (heap_pin_unlock), with the heaps lock let go. */
void tes_heap_collect_first_class(tes_heap_t *owner, bool force) {
  if (atomic_load_explicit(&owner->first_class_heaps, memory_order_relaxed) == 0) return;
  tes_heaps_lock();
  for (tes_heap_t *h = tes_heaps_all; h != NULL; h = h->all_next)
    if (h != owner && h->thread_default == owner && !atomic_load_explicit(&h->delete_requested, memory_order_acquire)) {
      heap_pin_unlock(h); /* its purges, and segments it frees, with the heaps lock let go */
      heap_collect(h, force, true, false);
      heap_lock_unpin(h);
    }
  tes_unlock(&heaps_lock);
}

/* Every page of the heap back to the NORMAL delayed-free tag (pages in the
 * class queues may keep USE_DELAYED from an earlier stay in the full
 * queue), waiting for remote freers that are pushing to this heap now; then
 * no remote free reads page->heap any more, so it may change or vanish. */
static TES_COLD void heap_stop_delayed(tes_heap_t *heap) {
  for (tes_page_t *p = heap->full.first; p != NULL; p = p->next) tes_page_set_delayed(p, TES_TF_NORMAL);
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++)
    for (tes_page_t *p = heap->queues[c].first; p != NULL; p = p->next) tes_page_set_delayed(p, TES_TF_NORMAL);
  /* Only this thread changes the kept lists: a walk without the lock. */
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++)
    for (tes_page_t *p = heap->kept[c].first; p != NULL; p = p->next) tes_page_set_delayed(p, TES_TF_NORMAL);
}

/* Detach every page from the heap's queues (for abandon and delete); its
 * retired pages are all purged, unless the caller does that itself (with
 * purge false: heap_abandon, outside the abandon lock). */
static TES_COLD void heap_detach(tes_heap_t *heap, bool purge) {
  heap_stop_delayed(heap);
  tes_heap_process_delayed(heap);
  if (!heap->is_static) heap_collect_pages(heap, false, false);
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    while (heap->queues[c].first != NULL) tes_heap_queue_remove(heap, heap->queues[c].first);
  }
  /* The pages keep their unfolded statistics: whichever heap takes them
   * next folds them (tes_stats_get counts every page in use, owned or
   * not), so the totals are the same without a fold here, whose walk of
   * every free list was 4% of mstress/8t (thread churn). */
  while (heap->full.first != NULL) {
    tes_page_t *page = heap->full.first;
    queue_unlink(&heap->full, page);
    page->in_full = 0;
    page->used = page->reserved;
  }
  if (purge) purge_expired(heap, 0, true, true);
}


/* Take over a segment: its pages join this heap's queues. */
void tes_heap_adopt_segment(tes_heap_t *heap, tes_segment_t *seg) {
  atomic_store_explicit(&seg->thread_id, heap->thread_id, memory_order_release);
  tes_segment_link(heap, seg);
  uint32_t count = seg->page_count;
  for (uint32_t i = 1; i < count && seg->used_pages > 0; i++) {
    tes_page_t *page = &seg->pages[i];
    /* A descriptor never set up may hold anything (segment.c, desc_setup). */
    if (!(seg->desc_ready & ((uint64_t)1 << i)) || !page->in_use) continue;
    atomic_store_explicit(&page->heap, heap, memory_order_release);
    tes_segment_page_bin(heap, page, &heap->bins[page->class_index]);
    page->next = page->prev = NULL;
    page->kept_empty = 0; /* counted by the heap it came from */
    if (tes_page_take_if_empty(page)) {
      bool last = seg->used_pages == 1;
      tes_page_in_use_set(page, 0);
      tes_heap_fold_page(heap, page, false);
      page_release(heap, page); /* may free the segment */
      if (last) return;
    } else {
      class_push_back(heap, page);
    }
  }
}

/* The first-class heap of `owner`'s thread listed first (only one another
 * thread deleted, when `deleted_only`), or NULL. */
static tes_heap_t *first_class_of(const tes_heap_t *owner, bool deleted_only) {
  tes_heap_t *found = NULL;
  tes_heaps_lock();
  for (tes_heap_t *h = tes_heaps_all; h != NULL && found == NULL; h = h->all_next)
    if (h != owner && h->thread_default == owner &&
        (!deleted_only || atomic_load_explicit(&h->delete_requested, memory_order_acquire)))
      found = h;
  tes_unlock(&heaps_lock);
  return found;
}

/* Move a first-class heap's pages into its thread's default heap, or free
 * them all when another thread destroyed it, and let the struct go (on that
 * thread, or once it is gone). */
static TES_COLD void delete_into(tes_heap_t *fc, tes_heap_t *heap) {
  bool requested = atomic_load_explicit(&fc->delete_requested, memory_order_acquire);
  if (requested && atomic_load_explicit(&fc->destroy_requested, memory_order_relaxed)) tes_heap_free_all(fc);
  else tes_heap_move_pages(fc, heap);
  tes_stats_fold_heap(fc);
  atomic_fetch_sub_explicit(requested ? &heap->first_class_deleted : &heap->first_class_heaps, 1,
                            memory_order_relaxed);
  tes_heap_release_struct(fc);
}

/* tes_heap_delete and tes_heap_destroy from another thread only mark the
 * heap: its owner frees its blocks locally (the owner's slice table lists
 * its pages) with no atomics, so moving the pages under it lost blocks and
 * corrupted the lists, and the destroy's clearing of the heap's slice
 * entries raced with the owner's own updates of its table. The owner moves
 * or frees them here, from its slow path, tes_heap_new, tes_collect, or its
 * exit. */
void tes_heap_process_deletes(tes_heap_t *heap) {
  while (atomic_load_explicit(&heap->first_class_deleted, memory_order_acquire) > 0) {
    /* A tes_heap_visit walk of this thread is under way (a visitor got
     * here): the heap may be the one walked; at the walk's end (heap_visit.c). */
    if (heap->visit_depth > 0) return;
    tes_heap_t *fc = first_class_of(heap, true);
    if (fc == NULL) break; /* its deleter has not marked it yet */
    delete_into(fc, heap);
  }
}

/* A thread's default heap is abandoned (its thread exits or is gone):
 * first-class heaps its thread left are deleted into it, as
 * tes_heap_delete would (their live blocks stay valid and go with the
 * default heap's segments to the abandoned list). Nobody may use them any
 * more (only their thread allocates from them or destroys them), and left
 * alone they kept their segments for good: their blocks freed later by
 * other threads waited on remote stacks no owner collects, and their
 * thread_default named a heap struct that the pool hands to the next new
 * thread. */
static TES_COLD void delete_first_class_heaps(tes_heap_t *heap) {
  while (atomic_load_explicit(&heap->first_class_heaps, memory_order_relaxed) +
             atomic_load_explicit(&heap->first_class_deleted, memory_order_acquire) > 0) {
    tes_heap_t *fc = first_class_of(heap, false);
    if (fc == NULL) break;
    delete_into(fc, heap);
  }
  atomic_store_explicit(&heap->first_class_heaps, 0, memory_order_relaxed);
  atomic_store_explicit(&heap->first_class_deleted, 0, memory_order_relaxed);
}

/* count: each segment counts as abandoned (not for a parked heap's, which
 * counted when it was parked). A parked heap's segments that the detach
 * frees (its remote frees emptied them) count as reclaimed: counted as
 * abandoned at the park and never adopted, they left heaps_abandoned above
 * heaps_reclaimed for good once malloc_trim had taken everything (10 of 54
 * segments after four generations of two threads; lib.api_stats). */
/* Under tes_abandon_lock (stats.c): tes_stats_get never walks a heap mid-abandon. */
static TES_COLD void heap_abandon(tes_heap_t *heap, bool count) {
  tes_abandon_lock_take();
  if (heap->is_default) delete_first_class_heaps(heap);
  unsigned parked_segments = 0;
  if (!count)
    for (tes_segment_t *seg = heap->segments; seg != NULL; seg = seg->next) parked_segments++;
  heap_detach(heap, false);
  /* Its retired pages are purged with the abandon lock let go (the purges
   * change nothing tes_stats_get reads; every abandon waited on another's
   * madvise calls: mstress/8t's sched_yield calls, PERFORMANCE.md,
   * twenty-fourth session), and before its segments leave: a page still on
   * this heap's purge list must not be handed out by the heap that adopts
   * its segment. Only this thread has the heap now (off the parked list, or
   * its thread's exit), but sweeps may purge it too (its purge lock). A
   * fork in this window leaves the heap detached in the child, unparked
   * and unabandoned, as a fork during tes_heap_park leaves one: its memory
   * stays the child's, unused. */
  tes_abandon_lock_give();
  purge_expired(heap, 0, true, true);
  tes_abandon_lock_take();
  while (heap->segments != NULL) {
    tes_segment_t *seg = heap->segments;
    tes_segment_unlink(heap, seg);
    for (uint32_t i = 1; i < seg->page_count; i++) {
      if (!(seg->desc_ready & ((uint64_t)1 << i))) continue; /* never handed out: zero, untouched */
      atomic_store(&seg->pages[i].heap, NULL);
      tes_page_set_bin(&seg->pages[i], &tes_bin_closed); /* the heap struct goes back to the pool */
    }
    seg->heap = NULL;
    atomic_store_explicit(&seg->thread_id, TES_TID_SHARED, memory_order_release);
    tes_abandoned_push(seg);
    if (count) tes_stats_heap_abandoned();
    else parked_segments--;
  }
  for (; parked_segments > 0; parked_segments--) tes_stats_heap_reclaimed();
  tes_large_reassign(heap, NULL, false); /* large blocks stay valid, ownerless */
  tes_stats_fold_heap(heap);
  tes_heap_release_struct(heap);
  tes_abandon_lock_give();
}

void tes_heap_abandon(tes_heap_t *heap) { heap_abandon(heap, true); }

/* ---- parked heaps ----------------------------------------------------------- */
/* An exited thread's default heap is parked whole (eighteenth session):
 * its segments, class queues, purge list and dates stay as they are, and
 * the next thread to start takes it over (tes_heap_unpark) instead of a
 * fresh heap that adopts the abandoned segments one by one. Under thread
 * churn (mstress: ten generations of threads), abandoning purged every
 * page the heap had retired (heap_detach) and the next generation faulted
 * the same pages in again: the kernel's share of mstress/8t was 27% of the
 * samples against tcmalloc's 11%. A parked heap is abandoned as before when
 * no thread takes it within a purge delay (heap_deferred_eighth, any
 * thread's), when more than TES_PARKED_MAX wait (the oldest), and by a
 * forced collect (malloc_trim); with TESSERA_HEAP_PARK=0 or a purge delay
 * of 0 it is not parked at all. The hardened build parks too (twentieth
 * session): the collect below returns its out-of-band bins and kept pages
 * to their pages first, its keys stay with the heap struct and so with its
 * pages' encoded links, and a block freed again after the exit is still
 * its double free (security.*_exited, security.double_free_parked_adopted).
 * Other threads' frees reach it as remote
 * frees (its segments have TES_TID_SHARED while parked, so no thread takes
 * them for its own), and their sweeps purge its pages as they come due. */
/* What a parked heap keeps of its retired pages for the next thread, by
 * retired_bytes. Nothing is due at the exit (the purge delay is 25-100 ms
 * and a thread of mstress lives ~10 ms), so unbounded a parked heap kept
 * every page it had retired in its life, and a thread that freed 16 MiB
 * before it exited left them resident (lib.api_park_rss); under churn each
 * heap's reserve only grew: mstress/8t's peak RSS 13.4 MiB (medians;
 * tcmalloc 12.2, TESSERA_HEAP_PARK=0 9.0). The newest pages stay (the
 * next thread takes them first, as dirty free pages): 10.6 MiB, 4,500
 * faults a run against 3,800 (0 kept: 7,000; abandoned: 9,300);
 * PERFORMANCE.md, nineteenth session. api_thread_reuse's generations fit
 * in it: no purge there. */
#define TES_PARK_RETAIN_BYTES ((size_t)768 << 10)

/* The heap's oldest retired pages are purged now until those still waiting
 * hold at most TES_PARK_RETAIN_BYTES. Forced (not judged by the adaptive
 * delay, which did not choose it), in runs of neighbours as any purge. */
static TES_COLD void park_trim(tes_heap_t *heap) {
  tes_lock(&heap->purge_lock);
  size_t waiting = 0;
  for (const tes_page_t *p = heap->purge.first; p != NULL; p = p->next) waiting += retired_bytes(p);
  if (waiting > TES_PARK_RETAIN_BYTES) {
    size_t excess = waiting - TES_PARK_RETAIN_BYTES;
    while (heap->purge.first != NULL && excess > 0) purge_first_run_locked(heap, 0, true, &excess, 0);
    purge_due_update(heap);
  }
  tes_unlock(&heap->purge_lock);
}

TES_COLD bool tes_heap_park(tes_heap_t *heap) {
  int64_t now = tes_os_clock_ms();
  if (!heap->is_default || !tes_opt(TES_OPTION_HEAP_PARK) || tes_purge_delay(now) <= 0) return false;
  /* First-class heaps to delete into it first (tes_heap_abandon does). */
  if (atomic_load_explicit(&heap->first_class_heaps, memory_order_relaxed) +
          atomic_load_explicit(&heap->first_class_deleted, memory_order_acquire) > 0)
    return false;
  /* As the abandon's detach, without its purge: the bins go back to their
   * pages where that empties them (the default build's keep the rest, the
   * blocks of pages that stay in use anyway: bin_park), and the pages that empties, or
   * that remote frees have emptied, retire (a segment left empty goes to
   * the cache), so that a block freed again after the exit is still
   * reported as the double free it is (security.*_released_exited);
   * only purges already due are made, and those beyond what a parked heap
   * keeps (park_trim). */
  heap_collect(heap, false, false, true);
  park_trim(heap);
  for (tes_segment_t *seg = heap->segments; seg != NULL; seg = seg->next) {
    atomic_store_explicit(&seg->thread_id, TES_TID_SHARED, memory_order_release);
    tes_stats_heap_abandoned();
  }
  tes_large_reassign(heap, NULL, false); /* large blocks stay valid, ownerless */
  heap->park_time = now;
  tes_heaps_lock();
  heap->park_next = parked_heaps;
  __atomic_store_n(&parked_heaps, heap, __ATOMIC_RELAXED);
  bool over = ++parked_count > TES_PARKED_MAX;
  tes_unlock(&heaps_lock);
  if (over) tes_heap_abandon_parked(INT64_MAX, 1); /* the oldest */
  return true;
}

/* The newest parked heap, now the calling thread's (its segments take the
 * new thread id), or NULL. */
TES_COLD tes_heap_t *tes_heap_unpark(uintptr_t thread_id) {
  if (!parked_any()) return NULL;
  tes_heaps_lock();
  tes_heap_t *heap = parked_heaps;
  if (heap != NULL) {
    __atomic_store_n(&parked_heaps, heap->park_next, __ATOMIC_RELAXED);
    parked_count--;
  }
  tes_unlock(&heaps_lock);
  if (heap == NULL) return NULL;
  heap->thread_id = thread_id;
  for (tes_segment_t *seg = heap->segments; seg != NULL; seg = seg->next) {
    atomic_store_explicit(&seg->thread_id, thread_id, memory_order_release);
    tes_stats_heap_reclaimed();
  }
  return heap;
}

/* Abandon up to `max` of the heaps parked before `before` (INT64_MAX: all),
 * oldest first. */
TES_COLD void tes_heap_abandon_parked(int64_t before, unsigned max) {
  for (unsigned n = 0; n < max && parked_any(); n++) {
    tes_heaps_lock();
    tes_heap_t **pp = &parked_heaps;
    while (*pp != NULL && (*pp)->park_next != NULL) pp = &(*pp)->park_next;
    tes_heap_t *heap = *pp;
    if (heap != NULL && heap->park_time < before) {
      __atomic_store_n(pp, NULL, __ATOMIC_RELAXED);
      parked_count--;
    } else {
      heap = NULL;
    }
    tes_unlock(&heaps_lock);
    if (heap == NULL) return;
    heap_abandon(heap, false);
  }
}

TES_COLD void tes_heap_move_pages(tes_heap_t *from, tes_heap_t *to) {
  heap_detach(from, true);
  while (from->segments != NULL) {
    tes_segment_t *seg = from->segments;
    tes_segment_unlink(from, seg);
    tes_heap_adopt_segment(to, seg);
  }
  tes_large_reassign(from, to, false);
}

TES_COLD void tes_heap_free_all(tes_heap_t *heap) {
  heap_stop_delayed(heap);
#if !TES_SECURE
  /* The dropped delayed blocks lose their marks too (tes_delayed_mark). */
  for (tes_block_t *b = atomic_load(&heap->delayed_free); b != NULL; b = tes_delayed_decode(heap, b->next)) {
    if (*tes_bin_mark(b) != tes_delayed_mark(tes_page_of(tes_segment_of(b), b))) break;
    *tes_bin_mark(b) = 0;
  }
#endif
  atomic_store(&heap->delayed_free, NULL);
  /* The blocks dropped with the bins lose their marks: a stale mark in a
   * block carved again later (by a heap whose struct is this one again)
   * would make another thread's free of it look like a double free
   * (tes_free_remote). */
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    tes_block_t *b = heap->bins[c].head;
    for (uint32_t held = tes_bin_held(&heap->bins[c]); held > 0 && b != TES_BIN_END; held--, b = b->next) {
      if (*tes_bin_mark(b) != (uintptr_t)&heap->bins[c]) break; /* handed out already (a double free): its link is data */
      *tes_bin_mark(b) = 0;
    }
  }
  bins_fold(heap, true);
  bins_reset(heap);
  /* Fold statistics first: the dropped blocks stay counted as allocated. */
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++)
    for (tes_page_t *p = heap->queues[c].first; p != NULL; p = p->next) tes_heap_fold_page(heap, p, true);
  for (tes_page_t *p = heap->full.first; p != NULL; p = p->next) tes_heap_fold_page(heap, p, true);
  tes_lock(&heap->purge_lock);
  /* Kept pages under the lock: another thread may be purging them in place
   * (kept_purge_locked), emptying their lists and installed count while
   * the fold walked them. */
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++)
    for (tes_page_t *p = heap->kept[c].first; p != NULL; p = p->next) tes_heap_fold_page(heap, p, true);
  while (heap->purge.first != NULL) purge_list_remove(heap, heap->purge.first);
  purge_due_update(heap);
  /* The kept pages go with their segments below. */
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    for (tes_page_t *p; (p = heap->kept[c].first) != NULL;) {
      queue_unlink(&heap->kept[c], p);
      p->kept_empty = 0;
    }
  }
  atomic_store_explicit(&heap->kept_purge_due, INT64_MAX, memory_order_relaxed);
  heap->kept_bytes = 0;
  heap->keep_open = false;
  heap->keep_restart = false;
  while (heap->segments != NULL) {
    tes_segment_t *seg = heap->segments;
    tes_segment_unlink(heap, seg);
    for (uint32_t i = 1; i < seg->page_count; i++) {
      tes_page_t *page = &seg->pages[i];
      if (!page->in_use) continue;
      tes_page_in_use_set(page, 0);
      page->in_full = 0;
      page->pinned = 0;
      tes_page_set_bin(page, &tes_bin_closed);
      seg->free_mask |= (uint64_t)1 << i;
    }
    seg->used_pages = 0;
    tes_segment_free(seg);
  }
  /* Still under the purge lock, which fork's prepare handler takes: a
   * child forked after the unlock must not find queues naming pages of
   * segments that are gone (its handler walks them). */
  memset(heap->queues, 0, sizeof heap->queues);
  memset(&heap->full, 0, sizeof heap->full);
  for (size_t i = 0; i < TES_DIRECT_COUNT; i++) heap->direct[i] = &tes_page_empty;
  tes_unlock(&heap->purge_lock);
  tes_large_reassign(heap, NULL, true);
}
