/* fit_check.c — the invariant checker of libmymalloc, for the tests (and a
 * debugger). Walks every run of an arena block by block, then the arena's
 * free index, and compares the two. The invariants are listed in
 * fit_internal.h. Not thread-safe: call it while no other thread uses the
 * arena. Uses a spare header flag bit to mark blocks seen in the index, and
 * clears it before returning.
 */
#include "fit_internal.h"

#include <stdio.h>

#define FIT_SEEN ((uint64_t)4)

typedef struct {
  fit_arena_t *arena;
  size_t count;
  unsigned long bytes;
  const char *error;
  fit_block_t *where;
} fit_index_walk_t;

static void visit_index(fit_block_t *b, void *ctx) {
  fit_index_walk_t *w = ctx;
  w->count++;
  if (w->error) return;
  if (b->owner != w->arena->id) {
    w->error = "index holds a block of another arena";
  } else if (!fit_is_free(b)) {
    w->error = "index holds an allocated block";
  } else if (b->size_flags & FIT_SEEN) {
    w->error = "block is in the index twice";
  } else {
    b->size_flags |= FIT_SEEN;
    w->bytes += fit_size(b);
    return;
  }
  w->where = b;
}

static void unmark(fit_block_t *b, void *ctx) {
  (void)ctx;
  b->size_flags &= ~FIT_SEEN;
}

/* Structure of the index itself: order, links, augmentation, bins. */
static const char *check_index_shape(fit_arena_t *a, fit_block_t **where) {
  if (a->index_kind == FIT_INDEX_LIST) {
    fit_block_t *prev = NULL;
    for (fit_block_t *b = a->list_head; b; prev = b, b = fit_links(b)->b) {
      *where = b;
      if (fit_links(b)->a != prev) return "list back link is wrong";
      if (prev && prev >= b) return "list is not in address order";
    }
  }
  if (a->index_kind != FIT_INDEX_SIZE_BINS) {
    /* bf_malloc's fast path does not test the index kind: it relies on these */
    for (size_t w = 0; w < FIT_BIN_WORDS; w++)
      if (a->bin_bits[w]) return "bins in use by an arena that is not binned";
    for (size_t i = 0; i < FIT_BIN_COUNT; i++)
      if (a->bins[i]) return "bins in use by an arena that is not binned";
  }
  if (a->index_kind == FIT_INDEX_SIZE_BINS) {
    for (size_t i = 0; i < FIT_BIN_COUNT; i++) {
      int marked = (a->bin_bits[i >> 6] >> (i & 63)) & 1;
      if (marked != (a->bins[i] != NULL)) return "bin bitmap disagrees with bin";
      for (fit_block_t *b = a->bins[i]; b; b = fit_links(b)->b) {
        *where = b;
        if (fit_size(b) != i * FIT_ALIGN) return "block in the wrong bin";
      }
    }
    for (size_t w = 0; w < FIT_BIN_WORDS; w++) {
      int marked = (a->bin_summary[w >> 6] >> (w & 63)) & 1;
      if (marked != (a->bin_bits[w] != 0)) return "bin summary disagrees with bitmap";
    }
  }
  return NULL;
}

/* In-order walk of a treap checking order, heap property and subtree_max. */
static const char *check_tree(fit_block_t *t, int by_size, fit_block_t **prev, size_t *max_out,
                              fit_block_t **where) {
  *max_out = 0;
  if (!t) return NULL;
  size_t lmax, rmax;
  const char *e = check_tree(fit_links(t)->a, by_size, prev, &lmax, where);
  if (e) return e;
  *where = t;
  if (*prev) {
    int ordered = by_size ? (fit_size(*prev) < fit_size(t) || (fit_size(*prev) == fit_size(t) && *prev < t))
                          : *prev < t;
    if (!ordered) return "tree is out of order";
  }
  if (by_size && fit_size(t) < FIT_BIN_LIMIT) return "binnable block in the size tree";
  for (int side = 0; side < 2; side++) {
    fit_block_t *c = side ? fit_links(t)->b : fit_links(t)->a;
    if (c && fit_treap_priority(c) > fit_treap_priority(t)) return "treap heap order broken";
  }
  *prev = t;
  e = check_tree(fit_links(t)->b, by_size, prev, &rmax, where);
  if (e) return e;
  size_t m = fit_size(t);
  if (lmax > m) m = lmax;
  if (rmax > m) m = rmax;
  if (!by_size && fit_links(t)->subtree_max != m) {
    *where = t;
    return "subtree_max is wrong";
  }
  *max_out = m;
  return NULL;
}

int fit_check_arena(fit_arena_t *a, char *err, size_t errlen) {
  const char *error = NULL;
  fit_block_t *where = NULL;
  size_t free_count = 0;
  unsigned long free_bytes = 0;
  int top_seen = a->top_last == NULL;

  for (fit_run_t *run = a->runs; run && !error; run = run->next) {
    fit_block_t *b = (fit_block_t *)((char *)run + sizeof(fit_run_t));
    size_t prev_size = 0;
    int prev_free = 0;
    for (;;) {
      where = b;
      size_t size = fit_size(b);
      if (b->owner != a->id) { error = "block owned by another arena"; break; }
      if (size < FIT_MIN_BLOCK || size % FIT_ALIGN) { error = "bad block size"; break; }
      if ((size_t)b->prev_units * FIT_ALIGN != prev_size) { error = "prev_units does not match predecessor"; break; }
      if (b->prev_free > 1) { error = "prev_free is neither 0 nor 1 (bf_free masks with it)"; break; }
      if (prev_free && !b->prev_free) { error = "free predecessor without prev_free"; break; }
      if (fit_is_free(b) && b->prev_free) { error = "free block with prev_free set"; break; }
      if (!b->prev_units && b->prev_free) { error = "prev_free set on the first block of a run"; break; }
      if (fit_is_free(b)) {
        if (prev_free) { error = "two adjacent free blocks"; break; }
        free_count++;
        free_bytes += size;
      }
      if (b == a->top_last) top_seen = 1;
      if (fit_is_last(b)) break;
      prev_free = fit_is_free(b);
      prev_size = size;
      b = fit_next_phys(b);
    }
  }
  if (!error && !top_seen) { error = "top_last is not in any run"; where = a->top_last; }
  if (!error && a->top_last && (!fit_is_last(a->top_last) || (char *)a->top_last + fit_size(a->top_last) != a->top_end)) {
    error = "top_last does not end the newest run";
    where = a->top_last;
  }
  if (!error && free_bytes != atomic_load_explicit(&a->free_bytes, memory_order_relaxed)) {
    error = "free_bytes counter disagrees with the blocks";
    where = NULL;
  }
  if (!error) error = check_index_shape(a, &where);
  if (!error && a->index_kind != FIT_INDEX_LIST) {
    fit_block_t *prev = NULL;
    size_t max;
    error = check_tree(a->tree_root, a->index_kind == FIT_INDEX_SIZE_BINS, &prev, &max, &where);
  }
  if (!error) {
    fit_index_walk_t w = {.arena = a};
    fit_index_each(a, visit_index, &w);
    fit_index_each(a, unmark, NULL);
    if (w.error) {
      error = w.error;
      where = w.where;
    } else if (w.count != free_count || w.bytes != free_bytes) {
      error = "index and runs disagree on the free blocks";
      where = NULL;
    }
  }
  if (!error) return 0;
  snprintf(err, errlen, "arena %u: %s (block %p)", a->id, error, (void *)where);
  return -1;
}

int fit_check_all(char *err, size_t errlen) {
  for (uint32_t id = 1; id < fit_arena_count(); id++) {
    fit_arena_t *a = fit_arena_by_id(id);
    if (a && a->index_kind != FIT_INDEX_NONE && fit_check_arena(a, err, errlen) != 0) return -1;
  }
  return 0;
}
