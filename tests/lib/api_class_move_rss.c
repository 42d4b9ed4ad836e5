/* api_class_move_rss.c — a program that moves from some size classes to
 * others does not keep the pages of the classes it left (nineteenth
 * session).
 *
 * Eight medium classes (12-40 KiB) each fill four of their 512 KiB pages
 * with blocks written in full, and free them all, one block of every page
 * first: the class's bin (256 KiB worth of blocks) then holds blocks of
 * each of its pages, and its empty head stays its head. Then 16 MiB of
 * 48 KiB blocks (another medium class) are written. The purge delay is
 * 60 s, so nothing is purged during the test: the new blocks fit in the
 * left classes' pages (16 MiB) or add to RSS. Before, the bins and heads
 * kept those pages until their flush a purge delay later, and RSS grew by
 * the new blocks on top of them (34 MiB); now a heap about to take a new
 * segment first flushes the other classes' bins and retires their empty
 * heads, and takes those pages: RSS may grow by at most 26 MiB (the 16 MiB
 * of the first blocks, the 2 MiB of the last segment's free pages, which
 * are taken first, and room to spare). The first classes' pages are
 * mostly taken by the next classes already (whenever the heap runs out of
 * free pages): 17 MiB resident after them before, 5 MiB now. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLASSES 8
#define PAGES 4
#define PAGE_BYTES (512 * 1024)
#define NEW_SIZE (48 * 1024)
#define NEW_COUNT (16 * MIB / NEW_SIZE)

static void *old_blocks[PAGES * PAGE_BYTES / (12 * 1024) + 1];
static void *new_blocks[NEW_COUNT];

int main(void) {
  REQUIRE(api_allocator_is_tessera(), "libtessera does not serve malloc");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 60000) == 0, "cannot set the purge delay");
  int64_t start = api_rss_bytes();
  static const size_t sizes[CLASSES] = {12 * 1024, 14 * 1024, 16 * 1024, 20 * 1024,
                                        24 * 1024, 28 * 1024, 32 * 1024, 40 * 1024};
  for (int c = 0; c < CLASSES; c++) {
    size_t per_page = PAGE_BYTES / sizes[c], n = PAGES * per_page;
    api_malloc_written(old_blocks, n, sizes[c], 1);
    /* One block of each page first (into the bin), then the rest. */
    for (size_t i = 0; i < n; i += per_page) free(old_blocks[i]);
    for (size_t i = 0; i < n; i++)
      if (i % per_page != 0) free(old_blocks[i]);
  }
  int64_t left = api_rss_bytes();
  api_malloc_written(new_blocks, NEW_COUNT, NEW_SIZE, 2);
  int64_t moved = api_rss_bytes();
  printf("rss: start %.1f MiB, classes left %.1f MiB, 16 MiB of another class live %.1f MiB\n",
         (double)start / MIB, (double)left / MIB, (double)moved / MIB);
  REQUIRE(moved - start >= 15 * MIB, "the new blocks did not add to RSS: nothing to measure");
  REQUIRE(moved - start <= 26 * MIB,
          "RSS grew by %.1f MiB: the pages of the classes left stayed resident beside the new ones",
          (double)(moved - start) / MIB);
  for (size_t i = 0; i < NEW_COUNT; i++) free(new_blocks[i]);
  printf("ok\n");
  return 0;
}
