/* alloc_inline.h — the two fast paths, inlined into every entry point.
 *
 * malloc (size <= 1 KiB, thread has a heap, page has a free block):
 *   heap = TLS; page = heap->direct[(size+15)/16]; pop page->free; used++
 *   ~12 instructions; anything else calls the noinline slow path in heap.c.
 * free (pointer in a segment the calling thread owns):
 *   segmap check (also rejects NULL and foreign pointers), mask to the
 *   segment, compare its thread id, push onto page->local_free, --used;
 *   ~20 instructions; only "--used == 0" (page empty or full) calls out.
 * The secure build (TES_SECURE) adds padding/canaries and checks here. */
#ifndef TES_ALLOC_INLINE_H
#define TES_ALLOC_INLINE_H

#include "internal.h"

TES_INLINE void *tes_malloc_inline(tes_heap_t *heap, size_t size) {
#if TES_SECURE
  size_t requested = size;
  size += TES_PADDING;
#endif
  if (tes_likely(size <= TES_DIRECT_MAX)) {
    tes_page_t *page = heap->direct[(size + 15) >> 4];
    tes_block_t *block = page->free;
    if (tes_likely(block != NULL)) {
      page->free = tes_block_next(page, block);
      page->used++;
#if TES_SECURE
      tes_secure_set_padding(page, block, requested);
#endif
      return block;
    }
  }
#if TES_SECURE
  size = requested;
#endif
  return tes_heap_malloc_generic(heap, size, false);
}

TES_INLINE void tes_free_inline(void *p) {
  if (tes_unlikely(tes_segmap_get(p) != 1)) {
    tes_free_slow(p); /* NULL, foreign, huge-aligned */
    return;
  }
  tes_segment_t *seg = tes_segment_of(p);
  tes_page_t *page = tes_page_of(seg, p);
#if TES_SECURE
  tes_secure_check_free(seg, page, p);
#endif
  if (tes_likely(atomic_load_explicit(&seg->thread_id, memory_order_relaxed) == tes_tls_heap->thread_id)) {
    tes_block_t *block = (tes_block_t *)p;
    tes_block_set_next(page, block, page->local_free);
    page->local_free = block;
    if (tes_unlikely(--page->used == 0)) tes_page_free_event(page);
  } else {
    tes_free_slow(p);
  }
}

#endif
