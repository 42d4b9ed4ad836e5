/* fit_size_index.h — the fast best-fit index: exact-size bins plus a
 * (size, address) treap for the rest. The bin operations are static inline
 * here because they are the whole fast path of bf_malloc/bf_free: included
 * by fit_index.h only.
 *
 * Bin i holds the free blocks of exactly i*16 bytes (i < FIT_BIN_COUNT, so
 * every block below 128 KiB), as a doubly linked list used LIFO: every block
 * of a bin is an exact fit for that size, so which one we take does not
 * change the policy, and the most recently freed one is the warmest in cache.
 * A bit per bin (bin_bits) and a bit per bitmap word (bin_summary) find the
 * smallest non-empty bin at or above a size with two or three
 * count-trailing-zeros steps: best fit in O(1) for binned sizes. Larger blocks
 * go to the treap (fit_treap.c), O(log n). Because every binned size is
 * smaller than every tree size, "smallest non-empty bin, else tree lower
 * bound" is exactly best fit.
 */
#ifndef TESSERA_FIT_SIZE_INDEX_H
#define TESSERA_FIT_SIZE_INDEX_H

#include "fit_internal.h"

static inline void bin_mark(fit_arena_t *a, size_t i) {
  size_t w = i >> 6;
  a->bin_bits[w] |= (uint64_t)1 << (i & 63);
  a->bin_summary[w >> 6] |= (uint64_t)1 << (w & 63);
}

static inline void bin_unmark(fit_arena_t *a, size_t i) {
  size_t w = i >> 6;
  a->bin_bits[w] &= ~((uint64_t)1 << (i & 63));
  if (!a->bin_bits[w]) a->bin_summary[w >> 6] &= ~((uint64_t)1 << (w & 63));
}

/* Bins are doubly linked, but the back link of a bin's head is left stale:
 * popping the head then never touches the block behind it (a cache miss per
 * allocation). Whether a block is the head is read from bins[i] instead. */
static inline void fit_size_index_insert(fit_arena_t *a, fit_block_t *b) {
  size_t size = fit_size(b);
  if (size >= FIT_BIN_LIMIT) {
    fit_size_tree_insert(a, b);
    return;
  }
  size_t i = size / FIT_ALIGN;
  fit_block_t *head = a->bins[i];
  fit_links(b)->b = head;
  if (head)
    fit_links(head)->a = b;
  else
    bin_mark(a, i);
  a->bins[i] = b;
}

static inline void fit_size_index_remove(fit_arena_t *a, fit_block_t *b, size_t size) {
  if (size >= FIT_BIN_LIMIT) {
    fit_size_tree_remove(a, b, size);
    return;
  }
  size_t i = size / FIT_ALIGN;
  fit_block_t *next = fit_links(b)->b;
  if (a->bins[i] == b) {
    a->bins[i] = next;
    if (!next) bin_unmark(a, i);
    return;
  }
  fit_block_t *prev = fit_links(b)->a;
  fit_links(prev)->b = next;
  if (next) fit_links(next)->a = prev;
}

/* Takes the head b of non-empty bin i (an exact fit: bf_malloc's fast path). */
static inline void fit_size_index_pop(fit_arena_t *a, size_t i, fit_block_t *b) {
  fit_block_t *next = fit_links(b)->b;
  a->bins[i] = next;
  if (!next)
    bin_unmark(a, i);
  else
    __builtin_prefetch(next, 1); /* the next pop of this bin reads and writes it */
}

/* Smallest non-empty bin >= i, or FIT_BIN_COUNT. */
static inline size_t bin_search(const fit_arena_t *a, size_t i) {
  size_t w = i >> 6;
  uint64_t bits = a->bin_bits[w] & (~(uint64_t)0 << (i & 63));
  if (bits) return (w << 6) + (size_t)__builtin_ctzll(bits);
  size_t w1 = w + 1; /* first bitmap word still to look at */
  if (w1 >= FIT_BIN_WORDS) return FIT_BIN_COUNT;
  uint64_t mask = ~(uint64_t)0 << (w1 & 63);
  for (size_t sw = w1 >> 6; sw < FIT_BIN_WORDS / 64u; sw++, mask = ~(uint64_t)0) {
    uint64_t s = a->bin_summary[sw] & mask;
    if (s) {
      size_t word = (sw << 6) + (size_t)__builtin_ctzll(s);
      return (word << 6) + (size_t)__builtin_ctzll(a->bin_bits[word]);
    }
  }
  return FIT_BIN_COUNT;
}

static inline fit_block_t *fit_size_index_find(fit_arena_t *a, size_t need) {
  if (need < FIT_BIN_LIMIT) {
    size_t i = bin_search(a, need / FIT_ALIGN);
    if (i < FIT_BIN_COUNT) return a->bins[i];
  }
  return fit_size_tree_find(a, need);
}

#endif
