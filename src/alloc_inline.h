/* alloc_inline.h — the two fast paths, inlined into every entry point.
 *
 * malloc (size <= 1 KiB, thread has a heap, page has a free block):
 *   heap = TLS; page = heap->direct[(size+15)/16]; pop page->free; used++
 *   ~12 instructions. 1 KiB < size <= 128 KiB: class from clz, pop from the
 *   head page of the class queue (about 10 more). Anything else calls the
 *   noinline slow path in heap.c.
 * free (pointer in a segment the calling thread owns):
 *   look the pointer's 64 KiB slice up in the heap's slice table (a tag
 *   match gives the page, and proves the block is ours: NULL, foreign and
 *   other threads' pointers miss without being touched), push onto
 *   page->local_free, --used; ~15 instructions; only "--used == 0" (page
 *   empty or full) calls out.
 * The secure build (TES_SECURE) adds, inline: the link decode (3
 * instructions) and check, a prefetch of the page's next free block (small
 * classes, tes_page_take_in), tes_secure_arm on malloc (4: canary and requested size)
 * and tes_secure_free_quick on free (~20: block-start test, double-free
 * filter, canary); when that fails, secure.c judges and
 * reports (tail call, so the fast path saves no registers). Its bins
 * (tes_sbin_t) serve the medium classes only: the small ones pop and push
 * their pages' lists as before. */
#ifndef TES_ALLOC_INLINE_H
#define TES_ALLOC_INLINE_H

#include "internal.h"

#if !TES_SECURE
/* Return the bin's most recently freed block, if it has one; a bin whose
 * head lost its mark returns a malloc's result instead (tes_bin_refuse_malloc:
 * a tail call, so the fast path saves no registers). */
#define TES_BIN_POP_OR_RETURN(heap, bin, size)                                                                  \
  do {                                                                                                         \
    tes_block_t *recent_ = (bin)->head;                                                                        \
    /* Every block a free puts in the bin carries the bin's mark, and a pop                                   \
     * clears it. The head without it is the end (the bin is empty), or a                                     \
     * block handed out already: freed twice with other frees between (free                                   \
     * compares with the head only), so its link is the program's data. The                                   \
     * check is here, not in free, because the pop reads this line anyway                                     \
     * (the link beside the mark), while a free only writes the block:                                        \
     * reading the mark there was a cache miss on every free of a cold block                                  \
     * (fit-small, fit-large and batch-free ran 1.1-1.4x the time). */                                        \
    if (tes_likely(*tes_bin_mark(recent_) == (uintptr_t)(bin))) {                                              \
      (bin)->head = recent_->next;                                                                             \
      *tes_bin_mark(recent_) = 0; /* handed out: no longer in a bin */                                         \
      (bin)->tally += TES_BIN_POP;                                                                             \
      return recent_;                                                                                          \
    }                                                                                                          \
    if (tes_unlikely(recent_ != TES_BIN_END)) return tes_bin_refuse_malloc(heap, bin, size);                   \
  } while (0)
#endif

#if TES_SECURE
/* A hardened bin (internal.h, tes_sbin_t; medium classes) with two blocks
 * or more: hand out one drawn at random from every slot but the top one
 * (the block freed last), the hole filled from the slot below the top, the
 * top moved down. The page comes from the address. The block must still
 * hold what free left there: the freed tag in its size word, and in its
 * link slot (its last 16 bytes: tes_block_link_slot_in) its first word as
 * free read it, encoded with its page's keys (a write after free to
 * either word changes one side; neither is forged without the keys; the
 * first word is read, not written: a block never written keeps its first
 * OS page untouched, twenty-third session); anything else was written after free (or
 * the block handed out twice): reported as a corrupted free list, never
 * handed out (tes_sbin_damaged: a tail call, so the fast path saves no
 * registers). */
#define TES_SBIN_POP_OR_RETURN(heap, bin, size)                                          \
  do {                                                                                  \
    uint32_t n_ = (bin)->count;                                                         \
    if (n_ >= 2) {                                                                      \
      uint64_t x_ = (heap)->bin_random * 6364136223846793005u + 1442695040888963407u;    \
      (heap)->bin_random = x_;                                                          \
      size_t j_ = (size_t)(((x_ >> 32) * (n_ - 1)) >> 32); /* [0, n - 2] */             \
      tes_block_t *b_ = (bin)->slot[j_];                                                \
      (bin)->slot[j_] = (bin)->slot[n_ - 2];                                            \
      (bin)->slot[n_ - 2] = (bin)->slot[n_ - 1];                                        \
      (bin)->count = n_ - 1;                                                            \
      (bin)->pops++;                                                                    \
      tes_page_t *page_ = tes_page_of(tes_segment_of(b_), b_);                          \
      if (tes_unlikely(*tes_secure_size_word_in(page_, b_, false) < TES_FREED_TAG32_REMOTE || \
                       (uintptr_t)tes_block_link_slot_in(page_, b_, TES_KIND_MEDIUM)->next !=        \
                           tes_link_encode(page_, (uintptr_t)b_->next)))                    \
        return tes_sbin_damaged(heap, page_, b_, size);                                 \
      tes_secure_arm(page_, b_, size, TES_KIND_MEDIUM);                                 \
      return b_;                                                                        \
    }                                                                                   \
  } while (0)
#endif

/* Unlink the first block of page's free list (the caller checked that
 * there is one) and count it as used. */
TES_INLINE tes_block_t *tes_page_take_in(tes_page_t *page, unsigned kind) {
  tes_block_t *block = page->free;
#if TES_SECURE
  if (kind == TES_KIND_SMALL) {
    /* The hardened small pop (malloc's fast path): the link checked as
     * tes_block_next_checked_in does, with two differences. (1) The next
     * block is prefetched: it is the page's next malloc, and a block of a
     * page list was freed (or carved) long before, so that malloc's read of
     * its link missed the cache (46% of the hardened malloc's samples in
     * bench_python; the default build's bins hand back a block freed just
     * before). (2) The decoded link is stored before the check, which then
     * uses its register (the check's copy of it went: the prefetch costs no
     * instruction); a link that fails the check is replaced by NULL at once,
     * on the cold path, before anything reads page->free. */
    tes_block_t *next = tes_block_next_in(page, block, kind);
    page->free = next;
    __builtin_prefetch(next);
    uintptr_t apart = (uintptr_t)next ^ (uintptr_t)block;
    if (tes_unlikely(apart >= ((uintptr_t)1 << TES_SEGMENT_SHIFT))) {
      __asm__("" : "+r"(apart));
      if (apart != (uintptr_t)block) page->corrupt_link = block; /* next is not NULL */
      page->free = NULL;
    }
    page->used++;
    return block;
  }
#endif
  page->free = tes_block_next_checked_in(page, block, kind);
  page->used++;
  return block;
}
TES_INLINE tes_block_t *tes_page_take(tes_page_t *page) { return tes_page_take_in(page, TES_KIND_ANY); }

/* A block handed out for `requested` bytes: in the hardened build, its
 * canary and recorded size (after any zeroing, which would wipe them).
 * small: the page is a small one (the direct table's), known at compile
 * time: the size word's place takes no compare. */
TES_INLINE void tes_block_arm_in(const tes_page_t *page, void *block, size_t requested, unsigned small) {
#if TES_SECURE
  tes_secure_arm(page, block, requested, small);
#else
  (void)page, (void)block, (void)requested, (void)small;
#endif
}
TES_INLINE void tes_block_arm(const tes_page_t *page, void *block, size_t requested) {
  tes_block_arm_in(page, block, requested, false);
}

/* The page's first free block for a request of `size` bytes, armed, or
 * NULL when it has none. kind: TES_KIND_* (true: small), a constant where
 * the caller knows it: the link's and the size word's places take no
 * compare of the block size. */
TES_INLINE tes_block_t *tes_page_pop(tes_page_t *page, size_t size, unsigned kind) {
  if (tes_unlikely(page->free == NULL)) return NULL;
  tes_block_t *block = tes_page_take_in(page, kind);
  tes_block_arm_in(page, block, size, kind);
  return block;
}

TES_INLINE void *tes_malloc_inline(tes_heap_t *heap, size_t size) {
  if (tes_likely(size <= TES_DIRECT_MAX - TES_PADDING)) {
#if !TES_SECURE
    tes_bin_t *bin = heap->direct_bin[(size + 15) >> 4];
    TES_BIN_POP_OR_RETURN(heap, bin, size);
#endif
    tes_page_t *page = heap->direct[(size + TES_PADDING + 15) >> 4];
    tes_block_t *block = tes_page_pop(page, size, TES_KIND_SMALL);
    if (tes_likely(block != NULL)) return block;
#if TES_SECURE
    return tes_heap_malloc_miss(size, heap, page); /* the page popped from: no second look-up there */
#endif
  } else if (tes_likely(size <= TES_MEDIUM_BLOCK_MAX - TES_PADDING)) {
    /* 1 KiB < size <= 128 KiB: the class from clz, then the same pop from
     * the head page of its queue (the slow path makes that head a page
     * with a free block whenever it can). */
    unsigned c = tes_class_of_above_256(size + TES_PADDING);
#if !TES_SECURE
    tes_bin_t *bin = &heap->bins[c];
    TES_BIN_POP_OR_RETURN(heap, bin, size);
    tes_page_t *page = heap->queues[c].first;
    if (tes_likely(page != NULL)) {
      tes_block_t *block = tes_page_pop(page, size, TES_KIND_ANY);
      if (tes_likely(block != NULL)) return block;
    }
#else
    /* The kind known from the size: the pop finds the link (a medium
     * block's is at its end: tes_block_link_slot_in) and the size word
     * with no compare of the page's block size. */
    tes_page_t *page;
    if (size > TES_SMALL_BLOCK_MAX - TES_PADDING) { /* the classes with bins: medium */
      tes_sbin_t *bin = tes_sbin_of(heap, c);
      TES_SBIN_POP_OR_RETURN(heap, bin, size);
      page = heap->queues[c].first;
      if (tes_likely(page != NULL)) {
        tes_block_t *block = tes_page_pop(page, size, TES_KIND_MEDIUM);
        if (tes_likely(block != NULL)) return block;
      }
    } else {
      page = heap->queues[c].first;
      if (tes_likely(page != NULL)) {
        tes_block_t *block = tes_page_pop(page, size, TES_KIND_SMALL);
        if (tes_likely(block != NULL)) return block;
      }
    }
    return tes_heap_malloc_miss(size, heap, page);
#endif
  }
  return tes_heap_malloc_generic(heap, size, false);
}

/* A block of a page this thread owns: into bin (the page's heap's bin, as
 * the slice table or the page has it) while it has room, else onto the
 * page's local free list. The page is read through pagep where it is
 * needed: a push to the bin loads no page (nor the slice table's entry). */
TES_INLINE void tes_free_owned_to(tes_page_t *const *pagep, tes_block_t *block, tes_bin_t *bin) {
#if !TES_SECURE
  /* The room read on its own (16 bits of tally, at its byte 1):
   * GCC then tests it in memory (`cmpw $0`: a plain read, which only the
   * owner makes; the relaxed atomic load it was until the seventeenth
   * session cost a `movzbl` and a `test`) and decrements tally with one
   * instruction, instead of loading, testing, decrementing and storing the
   * word. (A byte until the twenty-second session: `cmpb`, the same one
   * instruction.) */
  if (tes_likely(*(const tes_bin_room_t *)((const char *)&bin->tally + 1) != 0)) {
    /* The default build's double-free checks, without reading the block
     * (free only writes it): a block freed twice in a row is the bin's
     * head; one freed again with other frees between is caught when the
     * bin reaches it (TES_BIN_POP_OR_RETURN, and the flush), before it is handed out
     * a second time. The mark is the bin's address in the block's second
     * word. A tail call: the fast path saves no registers. */
    tes_block_t *head = bin->head;
    if (tes_unlikely(block == head)) {
      tes_report_double_free(*pagep, block);
      return; /* when the program goes on: not linked twice */
    }
    block->next = head;
    *tes_bin_mark(block) = (uintptr_t)bin;
    bin->head = block;
    bin->tally -= TES_BIN_ROOM_ONE;
    return;
  }
  /* Bin full or off. A block freed twice in a row is the bin's head or the
   * head of its page's list (values loaded anyway). A medium block still in
   * the bin carries its mark, and the bin is searched (a program's data
   * that looks like a mark costs a search, never a false report); medium
   * bins hold 2-64 blocks (up to 127 grown) and fill often. A small block is not read: a loop
   * of small frees with the bin full ran 1.36x the time with that read (a
   * cache miss on every cold block), so one freed again while its full bin
   * holds it, with other frees between, is not caught here, unless its
   * page's list is empty: the push below would then write NULL over the
   * bin's link in the block, and the pop after it read the mark at address
   * 8 (SIGSEGV in malloc, no report: a 16-byte block freed, 63 more, then
   * it again). The read is paid only by a page's first free since its list
   * was last taken; with a block of the list there, the bin's pop reaches
   * that block, finds no mark, and reports (TES_BIN_POP_OR_RETURN). */
  /* Room zero with room borrowed by the drift (256 pops or more since the
   * fold): the room may have run out with the bin not full (internal.h,
   * TES_BIN_POP). With fewer pops nothing is borrowed and room zero is a
   * full bin: its page's way below, no fold. (Until the twenty-third
   * session any pop sent the free out, and a bin hovering at its limit, a
   * pop, two frees, called out at every second free: 10% of the 64-bit
   * traces' frees, 5% of their instructions.) A tail call (as above). */
  if (tes_bin_drift_of(bin->tally) != 0) {
    tes_bin_room_out(*pagep, bin, block);
    return;
  }
  tes_page_t *page = *pagep;
  tes_block_t *local = page->local_free;
  if (tes_unlikely(block == bin->head || local == block)) {
    tes_report_double_free(page, block);
    return;
  }
  if ((page->block_size > TES_DIRECT_MAX || local == NULL)) {
    uintptr_t mark = *tes_bin_mark(block);
    if (tes_unlikely(mark == (uintptr_t)bin)) {
      tes_free_owned_checked(page, bin, block);
      return;
    }
    /* On the heap's delayed list (another thread freed it into a full
     * page): pushed here too, it was linked twice, a cycle handed out
     * for ever (security.default_continue_after_double_free_delayed_owner_nobins). */
    if (tes_unlikely(mark == tes_delayed_mark(page))) {
      tes_report_double_free(page, block);
      return;
    }
  }
  /* A small block still in its full bin, freed again with other frees
   * between and its page's list not empty, is not caught above: it goes
   * onto the page's list while the bin still links it. Its mark cleared
   * (a store beside the link's, no read), the bin's pop refuses it when it
   * gets there (TES_BIN_POP_OR_RETURN, and the flush and park walks), and
   * the page's list hands it out once. With the mark left, the bin handed
   * it out, then the page's list a second time, and the program's data
   * became that list's head (SIGSEGV in malloc's page pop, continue mode:
   * lib.api_adopted_double_free's later rounds, twenty-second session). */
  *tes_bin_mark(block) = 0;
  tes_page_push_local(page, block);
#else
  (void)bin;
  tes_page_push_local(*pagep, block);
#endif
}
TES_INLINE void tes_free_owned(tes_page_t *page, tes_block_t *block) {
#if !TES_SECURE
  tes_free_owned_to(&page, block, page->bin);
#else
  tes_free_owned_to(&page, block, NULL);
#endif
}

TES_INLINE void tes_free_inline(void *p) {
  tes_slices_t *slices = tes_tls_slices;
#if TES_SECURE
  /* A page of our own small/medium segment: a local free, no atomics. The
   * tag tells a small page (the slice number) from a medium one (with
   * TES_SLICE_MEDIUM): the small free, the common one, takes no compare of
   * the page's block size. */
  size_t slot;
  unsigned kind = tes_slice_kind(slices, p, &slot);
  tes_page_t *page;
  if (tes_likely(kind == TES_KIND_SMALL)) {
    page = slices->entry[slot].page;
    if (tes_unlikely(!tes_secure_free_quick_in(page, p, TES_KIND_SMALL))) {
      tes_secure_free_local(p, page); /* reports, frees unless it must not */
      return;
    }
    tes_page_push_local_in(page, (tes_block_t *)p, TES_KIND_SMALL);
    return;
  } else if (tes_likely(kind == TES_KIND_MEDIUM)) {
    page = slices->entry[slot].page;
    if (tes_unlikely(!tes_secure_free_quick_in(page, p, TES_KIND_MEDIUM))) {
      tes_secure_free_local(p, page);
      return;
    }
    /* A medium block: into its heap's bin of the class while it has room
     * (the page is ours and in use: its heap is set), with its first word
     * encoded with the page's keys in its link slot, which the pop checks
     * (a write after free, as a link's check finds on a free list). */
    tes_sbin_t *bin = tes_sbin_of(atomic_load_explicit(&page->heap, memory_order_relaxed), page->class_index);
    uint32_t n = bin->count;
    if (tes_likely(n < bin->limit)) {
      tes_block_link_slot_in(page, (tes_block_t *)p, TES_KIND_MEDIUM)->next =
          (tes_block_t *)tes_link_encode(page, (uintptr_t)((tes_block_t *)p)->next);
      bin->slot[n] = (tes_block_t *)p;
      bin->count = n + 1;
      return;
    }
    tes_page_push_local_in(page, (tes_block_t *)p, TES_KIND_MEDIUM);
  } else {
    tes_free_slow(p); /* NULL, foreign, remote, large, not in the table */
  }
#else
  size_t slot;
  if (tes_likely(tes_slice_hit(slices, p, &slot))) {
    /* A page of our own small/medium segment: a local free, no atomics. */
    tes_free_owned_to(&slices->entry[slot].page, (tes_block_t *)p, slices->entry[slot].bin);
  } else {
    tes_free_slow(p); /* NULL, foreign, remote, large, not in the table */
  }
#endif
}

size_t tes_usable_size_slow(const void *p); /* alloc.c: every pointer, checked */

/* malloc_usable_size. A block of a page this thread owns is found by the
 * free fast path's slice lookup and answered from its page; programs that
 * keep their own byte counts (redis's zmalloc) ask on every malloc and
 * free. The hardened build answers the requested size its padding records,
 * once the pointer proves to be a carved block's start; anything else
 * (a size word that is no size: freed, or overwritten) takes the checked
 * path. */
TES_INLINE size_t tes_usable_size_inline(const void *p) {
  const tes_slices_t *slices = tes_tls_slices;
  size_t slot;
#if !TES_SECURE
  if (tes_likely(tes_slice_hit(slices, p, &slot))) return slices->entry[slot].page->block_size;
#else
  unsigned kind = tes_slice_kind(slices, p, &slot);
  uint32_t requested;
  if (tes_likely(kind == TES_KIND_SMALL)) {
    if (tes_likely(tes_secure_recorded_size(slices->entry[slot].page, p, TES_KIND_SMALL, &requested))) return requested;
  } else if (kind == TES_KIND_MEDIUM) {
    if (tes_likely(tes_secure_recorded_size(slices->entry[slot].page, p, TES_KIND_MEDIUM, &requested))) return requested;
  }
#endif
  return tes_usable_size_slow(p);
}

#endif
