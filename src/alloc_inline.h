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
 * instructions), tes_secure_arm on malloc (4: canary and requested size)
 * and tes_secure_free_quick on free (~20: block-start test, double-free
 * filter, canary); when that fails, secure.c judges and
 * reports (tail call, so the fast path saves no registers). */
#ifndef TES_ALLOC_INLINE_H
#define TES_ALLOC_INLINE_H

#include "internal.h"

#if !TES_SECURE
/* Pop the bin's most recently freed block, or NULL. */
TES_INLINE tes_block_t *tes_bin_pop(tes_bin_t *bin) {
  tes_block_t *block = bin->head;
  if (tes_likely(block != NULL)) {
    bin->head = block->next;
    *tes_bin_mark(block) = 0; /* handed out: no longer in a bin */
    bin->tally += TES_BIN_POP;
  }
  return block;
}
#endif

/* Unlink the first block of page's free list (the caller checked that
 * there is one) and count it as used. */
TES_INLINE tes_block_t *tes_page_take(tes_page_t *page) {
  tes_block_t *block = page->free;
  page->free = tes_block_next_checked(page, block);
  page->used++;
  return block;
}

/* A block handed out for `requested` bytes: in the hardened build, its
 * canary and recorded size (after any zeroing, which would wipe them). */
TES_INLINE void tes_block_arm(const tes_page_t *page, void *block, size_t requested) {
#if TES_SECURE
  tes_secure_arm(page, block, requested);
#else
  (void)page, (void)block, (void)requested;
#endif
}

/* The page's first free block for a request of `size` bytes, armed, or
 * NULL when it has none. */
TES_INLINE tes_block_t *tes_page_pop(tes_page_t *page, size_t size) {
  if (tes_unlikely(page->free == NULL)) return NULL;
  tes_block_t *block = tes_page_take(page);
  tes_block_arm(page, block, size);
  return block;
}

TES_INLINE void *tes_malloc_inline(tes_heap_t *heap, size_t size) {
  if (tes_likely(size <= TES_DIRECT_MAX - TES_PADDING)) {
#if !TES_SECURE
    tes_block_t *recent = tes_bin_pop(heap->direct_bin[(size + 15) >> 4]);
    if (recent != NULL) return recent;
#endif
    tes_block_t *block = tes_page_pop(heap->direct[(size + TES_PADDING + 15) >> 4], size);
    if (tes_likely(block != NULL)) return block;
  } else if (tes_likely(size <= TES_MEDIUM_BLOCK_MAX - TES_PADDING)) {
    /* 1 KiB < size <= 128 KiB: the class from clz, then the same pop from
     * the head page of its queue (the slow path makes that head a page
     * with a free block whenever it can). */
    unsigned c = tes_class_of_above_256(size + TES_PADDING);
#if !TES_SECURE
    tes_block_t *recent = tes_bin_pop(&heap->bins[c]);
    if (recent != NULL) return recent;
#endif
    tes_page_t *page = heap->queues[c].first;
    if (tes_likely(page != NULL)) {
      tes_block_t *block = tes_page_pop(page, size);
      if (tes_likely(block != NULL)) return block;
    }
  }
  return tes_heap_malloc_generic(heap, size, false);
}

/* A block of a page this thread owns: into the page's heap's bin while it
 * has room, else onto the page's local free list. */
TES_INLINE void tes_free_owned(tes_page_t *page, tes_block_t *block) {
#if !TES_SECURE
  tes_bin_t *bin = page->bin;
  /* The default build's double-free check (glibc's tcache has the same):
   * a block in a bin carries the bin's address in its second word, which
   * a pop clears. A block freed again while it is in the bin, with or
   * without other frees in between, finds the mark; the bin is then
   * searched, so a program's own data that happens to look like a mark
   * costs a search, never a false report. Linked twice, a block was
   * handed out twice, and the bin could turn into a cycle that the next
   * flush walked for ever. A tail call: the fast path saves no registers. */
  if (tes_unlikely(*tes_bin_mark(block) == (uintptr_t)bin)) {
    tes_free_owned_checked(page, bin, block);
    return;
  }
  /* The room byte read on its own (little-endian low byte of tally): GCC
   * then tests it in memory and decrements tally with one instruction,
   * instead of loading, testing, decrementing and storing the word. */
  if (tes_likely(__atomic_load_n((const uint8_t *)&bin->tally, __ATOMIC_RELAXED) != 0)) {
    block->next = bin->head;
    *tes_bin_mark(block) = (uintptr_t)bin;
    bin->head = block;
    bin->tally--;
    return;
  }
  /* Bin full or off: a block freed twice in a row is at the head of its
   * page's list (one compare on a value loaded anyway). */
  if (tes_unlikely(page->local_free == block)) {
    tes_report_double_free(page, block);
    return;
  }
#endif
  tes_page_push_local(page, block);
}

TES_INLINE void tes_free_inline(void *p) {
  tes_heap_t *heap = tes_tls_heap;
  size_t slot;
  if (tes_likely(tes_slice_hit(heap, p, &slot))) {
    /* A page of our own small/medium segment: a local free, no atomics. */
    tes_page_t *page = heap->slice_page[slot];
#if TES_SECURE
    if (tes_unlikely(!tes_secure_free_quick(page, p))) {
      tes_secure_free_local(page, p); /* reports, frees unless it must not */
      return;
    }
#endif
    tes_free_owned(page, (tes_block_t *)p);
  } else {
    tes_free_slow(p); /* NULL, foreign, remote, large, not in the table */
  }
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
  tes_heap_t *heap = tes_tls_heap;
  size_t slot;
  if (tes_likely(tes_slice_hit(heap, p, &slot))) {
    const tes_page_t *page = heap->slice_page[slot];
#if !TES_SECURE
    return page->block_size;
#else
    uint32_t requested;
    if (tes_likely(tes_secure_recorded_size(page, p, &requested))) return requested;
#endif
  }
  return tes_usable_size_slow(p);
}

#endif
