/* free_count_link.c — white-box test of the hardened fold's walk
 * (tes_page_free_count, src/page.c), linked with the hardened static
 * library (tessera_fault_secure; no fault is armed) and its internal
 * header.
 *
 * A page's free list whose first block's link (encoded with the page's
 * keys, as only the allocator or someone holding them can write it)
 * points inside a free block, 16 bytes past its start, where a valid
 * encoded NULL waits: before, the walk checked only that a link stayed
 * among the page's carved blocks, counted the interior address as a
 * block and ended there (count 2, no report). Now a link must be a block
 * start: the count stops at the first block, reported as a corrupted
 * free list (run with TESSERA_ABORT_ON_ERROR=0; the runner checks the
 * line). */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

int main(void) {
  void *first = malloc(1000); /* class 1,024 in the hardened build: a carve of 8 blocks, 7 left on `free` */
  if (first == NULL) return 2;
  tes_page_t *page = tes_page_of(tes_segment_of(first), first);
  tes_block_t *b = page->free;
  if (b == NULL || tes_block_next(page, b) == NULL) {
    printf("set-up failed: fewer than two blocks on the page's free list\n");
    return 5;
  }
  tes_block_t *interior = (tes_block_t *)((uint8_t *)b + 16);
  tes_block_set_next(page, interior, NULL);
  tes_block_set_next(page, b, interior);
  size_t n = tes_page_free_count(page);
  if (n != 1) {
    printf("the walk counted %zu blocks past a link into a block's inside (1 expected)\n", n);
    return 1;
  }
  printf("the walk stopped at the link into a block's inside\n");
  return 0;
}
