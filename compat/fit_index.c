/* fit_index.c — visiting every block of an arena's free index, whatever its
 * kind (for the checker). The hot dispatch is inline in fit_index.h.
 */
#include "fit_internal.h"

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
