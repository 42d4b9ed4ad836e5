/* fit_arena.h — malloc and free over one arena: pick a block through the
 * arena's free index, split off the remainder, coalesce on free with both
 * physical neighbours inside the run. The policy (first / best fit) lives in
 * the index; this code is the same for every variant, so the naive and fast
 * versions differ only in how they search.
 *
 * Static inline and parameterised by the index kind: fit_api.c instantiates
 * them with the kind known at compile time for the fast path of each entry
 * point (the index switch folds away and the bins are inlined), and
 * fit_arena.c once with the kind read at run time for everything else.
 * Callers guarantee that one thread at a time works on an arena.
 */
#ifndef TESSERA_FIT_ARENA_H
#define TESSERA_FIT_ARENA_H

#include "fit_index.h"

#include <errno.h>

/* Is b the last block of the run the arena can still extend? (An arena has
 * many runs; only the newest one may grow, so only its end is tracked.) */
static inline int fit_ends_top_run(const fit_arena_t *a, fit_block_t *b) {
  return (char *)b + fit_size(b) == a->top_end;
}

/* Block size for a request: header + payload, aligned, at least the minimum.
 * 0 when the request is too large to ever be served. */
static inline size_t fit_block_size_for(size_t size) {
  if (size > FIT_MAX_BLOCK - FIT_HEADER_SIZE - FIT_ALIGN - sizeof(fit_run_t)) return 0;
  size_t need = (size + FIT_HEADER_SIZE + FIT_ALIGN - 1) & ~(size_t)(FIT_ALIGN - 1);
  return need < FIT_MIN_BLOCK ? FIT_MIN_BLOCK : need;
}

/* Best fit with the size bins: which end of free block b to hand out when
 * it is split. The end next to the neighbour allocated more recently:
 * blocks allocated together tend to be freed together (Wilson, Johnstone,
 * Neely and Boles, "Dynamic Storage Allocation: A Survey and Critical
 * Review", 1995, on phase behaviour), so the remainder then lies next to
 * the neighbour likely to be freed first and merges with it instead of
 * staying a fragment. With no predecessor (first block of a run) the
 * remainder goes to the successor's side; with no successor (the end of a
 * run, where the break grows) to the predecessor's, as the back-carving
 * rule did. Costs the two neighbours' headers on a split. The block chosen
 * is the same either way. */
static inline int fit_carve_front(fit_block_t *b) {
  if (fit_is_last(b)) return 0;
  if (!b->prev_units) return 1;
  return fit_allocated_after(fit_prev_phys(b), fit_next_phys(b));
}

/* Block b (`size` bytes, FIT_LAST in `last`) has just changed: its
 * successor learns its new predecessor's size and whether it is free, or,
 * at the end of a run, b becomes the arena's top block if its run is the
 * one that grows. */
static inline void fit_tell_successor(fit_arena_t *a, fit_block_t *b, size_t size, uint64_t last,
                                      uint8_t b_is_free) {
  if (!last) {
    fit_block_t *next = (fit_block_t *)((char *)b + size);
    next->prev_units = (uint32_t)(size / FIT_ALIGN);
    next->prev_free = b_is_free;
  } else if (fit_ends_top_run(a, b)) {
    a->top_last = b;
  }
}

/* Splits free block b (`have` bytes, not in the index) handing out its
 * front `need` bytes; the back stays free and goes into the index. Returns
 * the allocated block, without its stamp. */
static inline fit_block_t *fit_split_front_k(fit_arena_t *a, fit_block_t *b, size_t have, size_t need,
                                             fit_index_kind_t kind) {
  uint64_t last = b->size_flags & FIT_LAST;
  size_t rest = have - need;
  fit_block_t *rem = (fit_block_t *)((char *)b + need);
  rem->prev_units = (uint32_t)(need / FIT_ALIGN);
  rem->owner = (uint16_t)a->id;
  rem->prev_free = 0; /* b, in front of it, is in use */
  rem->remote_freed = 0;
  fit_set_size(rem, rest, FIT_FREE | last);
  fit_index_insert_k(a, rem, kind);
  fit_set_size(b, need, 0);
  fit_tell_successor(a, rem, rest, last, 1); /* its prev_free was set already: b was free */
  return b;
}

/* The allocated back of a split block: `rest` free bytes stay at b (the
 * caller has sized and indexed them), the `need` bytes after them become an
 * allocated block, stamped now, whose successor learns its new
 * predecessor (or which becomes the top of its run). */
static inline fit_block_t *fit_split_back_block(fit_arena_t *a, fit_block_t *b, size_t rest, size_t need,
                                                uint64_t last) {
  fit_block_t *back = (fit_block_t *)((char *)b + rest);
  back->prev_units = (uint32_t)(rest / FIT_ALIGN);
  back->owner = (uint16_t)a->id;
  back->prev_free = 1; /* the free front */
  back->remote_freed = 0;
  fit_set_size(back, need, last);
  back->size_flags |= fit_stamp_now(a);
  fit_tell_successor(a, back, need, last, 0);
  return back;
}

static inline __attribute__((always_inline)) void *fit_arena_malloc_k(fit_arena_t *a, size_t size,
                                                                   fit_index_kind_t kind) {
  size_t need = fit_block_size_for(size);
  if (need == 0) {
    errno = ENOMEM;
    return NULL;
  }
  fit_block_t *b = fit_index_find_k(a, need, kind);
  int indexed = b != NULL;
  if (!b && !(b = fit_brk_grow(a, need))) return NULL;

  size_t have = fit_size(b);
  uint64_t last = b->size_flags & FIT_LAST;
  if (have - need >= FIT_MIN_BLOCK && kind == FIT_INDEX_SIZE_BINS && fit_carve_front(b)) {
    if (indexed) fit_index_remove_k(a, b, kind);
    b = fit_split_front_k(a, b, have, need, kind);
    b->size_flags |= fit_stamp_now(a);
    have = need;
  } else if (have - need >= FIT_MIN_BLOCK) {
    /* Split, handing out the back: the free front keeps its address, so an
     * address-ordered index (the naive list, the first-fit tree) needs no
     * reinsertion, and the remainder cannot touch another free block
     * because b was free and free blocks are never adjacent. The front's
     * neighbour bytes stay right: its predecessor is in use, and so is its
     * new successor. */
    size_t rest = have - need;
    fit_set_size(b, rest, FIT_FREE);
    if (indexed)
      fit_index_resized_k(a, b, have, kind);
    else
      fit_index_insert_k(a, b, kind);
    b = fit_split_back_block(a, b, rest, need, last);
    have = need;
  } else {
    if (indexed) fit_index_remove_k(a, b, kind);
    fit_set_size(b, have, last);
    b->size_flags |= fit_stamp_now(a); /* the neighbours' bytes may stay stale */
  }
  fit_add_free_bytes(a, -(long)have);
  return fit_payload(b);
}

static inline __attribute__((always_inline)) void fit_arena_free_k(fit_arena_t *a, fit_block_t *b,
                                                                 fit_index_kind_t kind) {
  size_t size = fit_size(b);
  uint64_t last = b->size_flags & FIT_LAST;
  fit_add_free_bytes(a, (long)size);

  if (!last) {
    fit_block_t *next = fit_next_phys(b);
    if (fit_is_free(next)) {
      fit_index_remove_k(a, next, kind);
      size += fit_size(next);
      last = next->size_flags & FIT_LAST;
    }
  }
  /* The predecessor's header is only read when prev_free says it may be
   * free. */
  if (b->prev_free && b->prev_units && fit_is_free(fit_prev_phys(b))) {
    /* Grow the predecessor in place: it keeps its address, so an
     * address-ordered index only needs its sizes refreshed. */
    fit_block_t *prev = fit_prev_phys(b);
    size_t old = fit_size(prev);
    size += old;
    /* b's header is now inside the merged block, but a second free of b
     * still reads it: it must say free, or that free would tear a live
     * neighbour out of the merged block. */
    b->size_flags |= FIT_FREE;
    fit_set_size(prev, size, FIT_FREE | last);
    b = prev;
    fit_index_resized_k(a, b, old, kind);
  } else {
    fit_set_size(b, size, FIT_FREE | last);
    b->prev_free = 0; /* the predecessor is in use: clear a stale byte */
    fit_index_insert_k(a, b, kind);
  }
  fit_tell_successor(a, b, size, last, 1);
}

#endif
