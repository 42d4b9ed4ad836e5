/* fit_index.c — one switch that sends the arena's free-index operations to
 * the index kind chosen for it (fit_arena_prepare): the naive list
 * (fit_list.c), the address treap (fit_treap.c) or the size bins
 * (fit_size_index.c). Kept apart so fit_arena.c reads as the policy-free
 * allocator it is.
 */
#include "fit_internal.h"

void fit_index_insert(fit_arena_t *a, fit_block_t *b) {
  switch (a->index_kind) {
  case FIT_INDEX_LIST: fit_list_insert(a, b); break;
  case FIT_INDEX_ADDR_TREE: fit_addr_tree_insert(a, b); break;
  default: fit_size_index_insert(a, b); break;
  }
}

void fit_index_remove(fit_arena_t *a, fit_block_t *b) {
  switch (a->index_kind) {
  case FIT_INDEX_LIST: fit_list_remove(a, b); break;
  case FIT_INDEX_ADDR_TREE: fit_addr_tree_remove(a, b); break;
  default: fit_size_index_remove(a, b, fit_size(b)); break;
  }
}

void fit_index_resized(fit_arena_t *a, fit_block_t *b, size_t old_size) {
  switch (a->index_kind) {
  case FIT_INDEX_LIST: break; /* ordered by address only */
  case FIT_INDEX_ADDR_TREE: fit_addr_tree_refresh(a, b); break;
  default:
    fit_size_index_remove(a, b, old_size);
    fit_size_index_insert(a, b);
    break;
  }
}

fit_block_t *fit_index_find(fit_arena_t *a, size_t need) {
  switch (a->index_kind) {
  case FIT_INDEX_LIST: return fit_list_find(a, need);
  case FIT_INDEX_ADDR_TREE: return fit_addr_tree_find(a, need);
  default: return fit_size_index_find(a, need);
  }
}

static void list_each(fit_arena_t *a, void (*visit)(fit_block_t *, void *), void *ctx) {
  for (fit_block_t *b = a->list_head; b; b = fit_links(b)->b) visit(b, ctx);
}

void fit_index_each(fit_arena_t *a, void (*visit)(fit_block_t *, void *), void *ctx) {
  switch (a->index_kind) {
  case FIT_INDEX_LIST: list_each(a, visit, ctx); break;
  case FIT_INDEX_ADDR_TREE: fit_addr_tree_each(a->tree_root, visit, ctx); break;
  case FIT_INDEX_SIZE_BINS: fit_size_index_each(a, visit, ctx); break;
  default: break;
  }
}
