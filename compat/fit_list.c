/* fit_list.c — the naive free index of the assignment: one doubly linked list
 * of free blocks in address order, searched linearly.
 *
 * First fit takes the first block that is large enough, which is the
 * lowest-address one; best fit scans the whole list for the smallest, keeping
 * the lowest address among equals and stopping at an exact fit. Insertion
 * walks the list to the block's address position: O(n), as in the reports
 * this reproduces. Links: a = previous, b = next (fit_links_t).
 */
#include "fit_internal.h"

void fit_list_insert(fit_arena_t *a, fit_block_t *b) {
  fit_block_t *prev = NULL, *cur = a->list_head;
  while (cur && cur < b) {
    prev = cur;
    cur = fit_links(cur)->b;
  }
  fit_links(b)->a = prev;
  fit_links(b)->b = cur;
  if (prev)
    fit_links(prev)->b = b;
  else
    a->list_head = b;
  if (cur) fit_links(cur)->a = b;
}

void fit_list_remove(fit_arena_t *a, fit_block_t *b) {
  fit_block_t *prev = fit_links(b)->a, *next = fit_links(b)->b;
  if (prev)
    fit_links(prev)->b = next;
  else
    a->list_head = next;
  if (next) fit_links(next)->a = prev;
}

fit_block_t *fit_list_find(fit_arena_t *a, size_t need) {
  if (a->policy == FIT_FIRST_FIT) {
    for (fit_block_t *cur = a->list_head; cur; cur = fit_links(cur)->b)
      if (fit_size(cur) >= need) return cur;
    return NULL;
  }
  fit_block_t *best = NULL;
  size_t best_size = 0;
  for (fit_block_t *cur = a->list_head; cur; cur = fit_links(cur)->b) {
    size_t s = fit_size(cur);
    if (s < need || (best && s >= best_size)) continue;
    best = cur;
    best_size = s;
    if (s == need) break;
  }
  return best;
}
