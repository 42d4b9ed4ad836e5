/* fit_arena.c — malloc and free over one arena: pick a block through the
 * arena's free index, split off the remainder, coalesce on free with both
 * physical neighbours inside the run. The policy (first / best fit) lives in
 * the index; this file is the same for every variant, so the naive and fast
 * versions differ only in how they search.
 *
 * Callers (fit_api.c) guarantee that one thread at a time works on an arena.
 */
#include "fit_index.h"

#include <errno.h>
#include <unistd.h>

/* Is b the last block of the run the arena can still extend? (An arena has
 * many runs; only the newest one may grow, so only its end is tracked.) */
static inline int fit_ends_top_run(const fit_arena_t *a, fit_block_t *b) {
  return (char *)b + fit_size(b) == a->top_end;
}

void fit_arena_prepare(fit_arena_t *a) {
  if (a->index_kind != FIT_INDEX_NONE) return;
  if (fit_use_naive())
    a->index_kind = FIT_INDEX_LIST;
  else
    a->index_kind = a->policy == FIT_FIRST_FIT ? FIT_INDEX_ADDR_TREE : FIT_INDEX_SIZE_BINS;
}

/* Block size for a request: header + payload, aligned, at least the minimum.
 * 0 when the request is too large to ever be served. */
static inline size_t fit_block_size_for(size_t size) {
  if (size > FIT_MAX_BLOCK - FIT_HEADER_SIZE - FIT_ALIGN - sizeof(fit_run_t)) return 0;
  size_t need = (size + FIT_HEADER_SIZE + FIT_ALIGN - 1) & ~(size_t)(FIT_ALIGN - 1);
  return need < FIT_MIN_BLOCK ? FIT_MIN_BLOCK : need;
}

void *fit_arena_malloc(fit_arena_t *a, size_t size) {
  size_t need = fit_block_size_for(size);
  if (need == 0) {
    errno = ENOMEM;
    return NULL;
  }
  fit_block_t *b = fit_index_find(a, need);
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
      fit_index_resized(a, b, have);
    else
      fit_index_insert(a, b);
    b = (fit_block_t *)((char *)b + rest);
    b->prev_units = (uint32_t)(rest / FIT_ALIGN);
    b->owner = a->id;
    fit_set_size(b, need, last | FIT_PREV_MAYBE_FREE); /* its predecessor is the free front */
    if (!last)
      fit_next_phys(b)->prev_units = (uint32_t)(need / FIT_ALIGN);
    else if (fit_ends_top_run(a, b))
      a->top_last = b;
    have = need;
  } else {
    if (indexed) fit_index_remove(a, b);
    /* The successor's FIT_PREV_MAYBE_FREE stays set: a stale hint only costs
     * free() one look at this header, and clearing it would cost a cache
     * miss on every exact fit. */
    fit_set_size_keep_hint(b, have, last);
  }
  fit_add_free_bytes(a, -(long)have);
  return fit_payload(b);
}

void fit_arena_free(fit_arena_t *a, fit_block_t *b) {
  size_t size = fit_size(b);
  uint64_t last = b->size_flags & FIT_LAST;
  fit_add_free_bytes(a, (long)size);

  if (!last) {
    fit_block_t *next = fit_next_phys(b);
    if (fit_is_free(next)) {
      fit_index_remove(a, next);
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
      fit_index_resized(a, b, old);
      goto linked;
    }
  }
  fit_set_size(b, size, FIT_FREE | last); /* the predecessor is allocated: hint cleared */
  fit_index_insert(a, b);
linked:
  if (!last) {
    fit_block_t *next = fit_next_phys(b);
    next->prev_units = (uint32_t)(size / FIT_ALIGN);
    next->size_flags |= FIT_PREV_MAYBE_FREE;
  } else if (fit_ends_top_run(a, b)) {
    a->top_last = b;
  }
}

/* Writes "tessera fit: WHO(0x...): WHY\n" with write(2): stdio could move the
 * program break under us, and this runs when something is already wrong. */
void fit_report_bad_free(const char *who, const void *ptr, const char *why) {
  char line[160];
  size_t n = 0;
  const char *parts[] = {"tessera fit: ", who, "(0x"};
  for (size_t i = 0; i < 3; i++)
    for (const char *s = parts[i]; *s && n < sizeof line - 40; s++) line[n++] = *s;
  uintptr_t v = (uintptr_t)ptr;
  char hex[2 * sizeof v];
  size_t h = 0;
  do {
    hex[h++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v && h < sizeof hex);
  while (h) line[n++] = hex[--h];
  line[n++] = ')';
  line[n++] = ':';
  line[n++] = ' ';
  for (const char *s = why; *s && n < sizeof line - 1; s++) line[n++] = *s;
  line[n++] = '\n';
  ssize_t ignored = write(2, line, n);
  (void)ignored;
}
