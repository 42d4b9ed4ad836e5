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
  if (have - need >= FIT_MIN_BLOCK) {
    /* Split, handing out the back: the free front keeps its address, so an
     * address-ordered index (the naive list, the first-fit tree) needs no
     * reinsertion, and the remainder cannot touch another free block
     * because b was free and free blocks are never adjacent. */
    size_t rest = have - need;
    fit_set_size_keep_hint(b, rest, FIT_FREE);
    if (indexed)
      fit_index_resized_k(a, b, have, kind);
    else
      fit_index_insert_k(a, b, kind);
    b = (fit_block_t *)((char *)b + rest);
    b->prev_units = (uint32_t)(rest / FIT_ALIGN);
    b->owner = a->id;
    fit_set_size(b, need, last | FIT_PREV_MAYBE_FREE); /* its predecessor is the free front */
    if (!last) {
      /* The successor's predecessor is now this allocated block: clear its
       * hint while its header is being written anyway (same cache line), so
       * its free does not have to look back here. */
      fit_block_t *next = fit_next_phys(b);
      next->prev_units = (uint32_t)(need / FIT_ALIGN);
      next->size_flags &= ~FIT_PREV_MAYBE_FREE;
    } else if (fit_ends_top_run(a, b))
      a->top_last = b;
    have = need;
  } else {
    if (indexed) fit_index_remove_k(a, b, kind);
    /* The successor's FIT_PREV_MAYBE_FREE stays set: a stale hint only costs
     * free() one look at this header, and clearing it would cost a cache
     * miss on every exact fit. */
    fit_set_size_keep_hint(b, have, last);
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
  /* The predecessor's header is only read when the hint says it may be
   * free (it is set whenever a block becomes free, on its successor). */
  if (b->prev_units != 0 && (b->size_flags & FIT_PREV_MAYBE_FREE)) {
    fit_block_t *prev = fit_prev_phys(b);
    if (fit_is_free(prev)) {
      /* Grow the predecessor in place: it keeps its address, so an
       * address-ordered index only needs its sizes refreshed. */
      size_t old = fit_size(prev);
      size += old;
      fit_set_size_keep_hint(prev, size, FIT_FREE | last);
      b = prev;
      fit_index_resized_k(a, b, old, kind);
      goto linked;
    }
  }
  fit_set_size(b, size, FIT_FREE | last); /* the predecessor is allocated: hint cleared */
  fit_index_insert_k(a, b, kind);
linked:
  if (!last) {
    fit_block_t *next = fit_next_phys(b);
    next->prev_units = (uint32_t)(size / FIT_ALIGN);
    next->size_flags |= FIT_PREV_MAYBE_FREE;
  } else if (fit_ends_top_run(a, b)) {
    a->top_last = b;
  }
}

#endif
