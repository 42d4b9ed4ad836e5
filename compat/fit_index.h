/* fit_index.h — one switch that sends the arena's free-index operations to
 * the index kind chosen for it (fit_arena_prepare): the naive list
 * (fit_list.c), the address treap (fit_treap.c) or the size bins
 * (fit_size_index.h). Kept apart so fit_arena.c reads as the policy-free
 * allocator it is. Static inline: the switch and the bin operations are on
 * every malloc and free.
 */
#ifndef TESSERA_FIT_INDEX_H
#define TESSERA_FIT_INDEX_H

#include "fit_internal.h"
#include "fit_size_index.h"

static inline void fit_index_insert_k(fit_arena_t *a, fit_block_t *b, fit_index_kind_t kind) {
  switch (kind) {
  case FIT_INDEX_LIST: fit_list_insert(a, b); break;
  case FIT_INDEX_ADDR_TREE: fit_addr_tree_insert(a, b); break;
  default: fit_size_index_insert(a, b); break;
  }
}

static inline void fit_index_remove_k(fit_arena_t *a, fit_block_t *b, fit_index_kind_t kind) {
  switch (kind) {
  case FIT_INDEX_LIST: fit_list_remove(a, b); break;
  case FIT_INDEX_ADDR_TREE: fit_addr_tree_remove(a, b); break;
  default: fit_size_index_remove(a, b, fit_size(b)); break;
  }
}

static inline void fit_index_resized_k(fit_arena_t *a, fit_block_t *b, size_t old_size, fit_index_kind_t kind) {
  switch (kind) {
  case FIT_INDEX_LIST: break; /* ordered by address only */
  case FIT_INDEX_ADDR_TREE: fit_addr_tree_refresh(a, b); break;
  default:
    fit_size_index_remove(a, b, old_size);
    fit_size_index_insert(a, b);
    break;
  }
}

static inline fit_block_t *fit_index_find_k(fit_arena_t *a, size_t need, fit_index_kind_t kind) {
  switch (kind) {
  case FIT_INDEX_LIST: return fit_list_find(a, need);
  case FIT_INDEX_ADDR_TREE: return fit_addr_tree_find(a, need);
  default: return fit_size_index_find(a, need);
  }
}

/* The same, with the index kind read from the arena. (The _k forms take it
 * as an argument so that a caller that knows it gets the switch folded.) */
static inline void fit_index_insert(fit_arena_t *a, fit_block_t *b) { fit_index_insert_k(a, b, a->index_kind); }
static inline void fit_index_remove(fit_arena_t *a, fit_block_t *b) { fit_index_remove_k(a, b, a->index_kind); }
static inline void fit_index_resized(fit_arena_t *a, fit_block_t *b, size_t old_size) {
  fit_index_resized_k(a, b, old_size, a->index_kind);
}
static inline fit_block_t *fit_index_find(fit_arena_t *a, size_t need) { return fit_index_find_k(a, need, a->index_kind); }

#endif
