/* api_growth_trim_spare.c — the pages a heap's growth_trim lets go of just
 * before it maps a new segment are not purged for that segment
 * (twenty-seventh session, gp27).
 *
 * A heap about to take a new segment first makes every other class let go
 * of what it holds idle (heap.c, growth_trim): each bin is flushed into its
 * pages, and a page whose only blocks were in a bin retires. Then, the
 * segment being new memory, the heap's retired pages were purged up to its
 * size (tes_heap_purge_for_growth), these among them: pages in use a moment
 * before, which a program whose phases alternate takes back at once, every
 * 4 KiB through a page fault (traces-cmu-classic: about 570 of the row's
 * 7,700 faults). They now wait for their timed purge instead.
 *
 * Four small classes are written over 12 pages each (3 MiB), then freed so
 * that each class's bin holds one block of each of its pages (the bin keeps
 * the first blocks freed, the rest go to their pages): every page stays in
 * use for its binned block. Then 8 MiB of 48 KiB blocks (a medium class)
 * stay live: the heap maps its first medium segment, and growth_trim's bin
 * flush retires the 48 small pages. The purge delay is 5 s, so no timed
 * purge runs. The small blocks written again must not fault the pages in
 * again (before: all 768 OS pages of them). */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#define CLASSES 4
#define PAGE_BYTES (64 * 1024) /* a small page */
#define PAGES_PER_CLASS 12
#define SMALL_BYTES ((size_t)CLASSES * PAGES_PER_CLASS * PAGE_BYTES)
#define SMALL_OS_PAGES (SMALL_BYTES / 4096)
#define MAX_BLOCKS (PAGES_PER_CLASS * PAGE_BYTES / 64)
#define MEDIUM_SIZE (48 * 1024)
#define MEDIUM_COUNT (8 * MIB / MEDIUM_SIZE)

static const size_t sizes[CLASSES] = {64, 128, 192, 256};
static void *small[CLASSES][MAX_BLOCKS];
static void *medium[MEDIUM_COUNT];

static long minor_faults(void) {
  struct rusage u;
  REQUIRE(getrusage(RUSAGE_SELF, &u) == 0, "getrusage failed");
  return u.ru_minflt;
}

static size_t class_count(int k) { return PAGES_PER_CLASS * PAGE_BYTES / sizes[k]; }

static void write_small(void) {
  for (int k = 0; k < CLASSES; k++) api_malloc_written(small[k], class_count(k), sizes[k], 1 + k);
}

/* The first block seen of each 64 KiB page first (into the bin), then the
 * rest (to their pages, none of which empties). */
static void free_small_binning_one_per_page(void) {
  for (int k = 0; k < CLASSES; k++) {
    size_t n = class_count(k);
    uintptr_t last_page = UINTPTR_MAX;
    for (size_t i = 0; i < n; i++) {
      uintptr_t page = (uintptr_t)small[k][i] / PAGE_BYTES;
      if (page == last_page) continue;
      last_page = page;
      free(small[k][i]);
      small[k][i] = NULL;
    }
    for (size_t i = 0; i < n; i++) free(small[k][i]);
  }
}

int main(void) {
  REQUIRE(api_allocator_is_tessera(), "libtessera does not serve malloc");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 5000) == 0, "cannot set the purge delay");
  /* A small block that stays: the small segment stays this heap's. */
  void *pin = malloc(16);
  REQUIRE(pin != NULL, "malloc failed");
  long before = minor_faults();
  write_small();
  long first = minor_faults() - before;
  free_small_binning_one_per_page();
  api_malloc_written(medium, MEDIUM_COUNT, MEDIUM_SIZE, 9);
  before = minor_faults();
  write_small();
  long again = minor_faults() - before;
  printf("small blocks written: %ld faults, again after the medium segment: %ld (%zu OS pages)\n", first, again,
         (size_t)SMALL_OS_PAGES);
  REQUIRE(first >= (long)SMALL_OS_PAGES / 2, "the first writing faulted %ld pages: nothing to measure", first);
  REQUIRE(again <= (long)SMALL_OS_PAGES / 4,
          "writing the small blocks again faulted %ld pages: the pages growth_trim retired were purged for the "
          "medium segment",
          again);
  for (int k = 0; k < CLASSES; k++)
    for (size_t i = 0; i < class_count(k); i++) free(small[k][i]);
  for (size_t i = 0; i < MEDIUM_COUNT; i++) free(medium[i]);
  free(pin);
  printf("ok\n");
  return 0;
}
