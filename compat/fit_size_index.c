/* fit_size_index.c — the cold part of the fast best-fit index (the hot part
 * is inline in fit_size_index.h): visiting every indexed block, for the
 * checker.
 */
#include "fit_internal.h"

static void each_in_tree(fit_block_t *t, void (*visit)(fit_block_t *, void *), void *ctx) {
  if (!t) return;
  each_in_tree(fit_links(t)->a, visit, ctx);
  visit(t, ctx);
  each_in_tree(fit_links(t)->b, visit, ctx);
}

void fit_size_index_each(fit_arena_t *a, void (*visit)(fit_block_t *, void *), void *ctx) {
  for (size_t i = 0; i < FIT_BIN_COUNT; i++)
    for (fit_block_t *b = a->bins[i]; b; b = fit_links(b)->b) visit(b, ctx);
  each_in_tree(a->tree_root, visit, ctx);
}
