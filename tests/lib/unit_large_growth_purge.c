/* unit_large_growth_purge.c — a large block written in fresh memory makes
 * room first (twenty-fifth session, foot25; src/large.c,
 * purge_for_large_growth, and src/purge.c, the growth purge's hold).
 *
 * 1. A heap that freed 4 MiB of small blocks (their pages retired, waiting
 *    for a purge delay of an hour) and then writes two fresh 2 MiB large
 *    blocks gives those pages back first: before, they stayed resident
 *    beside the new blocks until the delay (bench_footprint's large phase
 *    peaked at 133 MB against 116 MB).
 * 2. The pages of a segment the heap took dirty from the cache and has not
 *    carved yet are not purged for a large block: they are what it carves
 *    next (footprint's small phase took 42 of them back through faults).
 * 3. The growth purge is held off only by retakes of at least 1 MiB and a
 *    quarter of what it purged: one retaken page held it for a second
 *    before (two pages of footprint's medium phase held it for the rest of
 *    the run). */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <inttypes.h>
#include <string.h>

#define SMALL 64
#define SMALL_BYTES ((size_t)4 << 20)
#define SMALL_COUNT (SMALL_BYTES / SMALL)
#define LARGE ((size_t)2 << 20)

static void *small[SMALL_COUNT];

/* Resident OS pages among the small pages the blocks were carved in. */
static size_t small_resident(void) {
  size_t page = tes_os_page_size(), total = 0;
  uintptr_t last = 0;
  for (size_t i = 0; i < SMALL_COUNT; i++) {
    uintptr_t p = (uintptr_t)small[i] & ~(uintptr_t)(page - 1);
    if (p == last) continue;
    last = p;
    total += tes_os_resident_pages((void *)p, page);
  }
  return total;
}

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 3600000) == 0, "an hour's purge delay");
  tes_collect(true); /* an empty cache: the large blocks below are fresh mappings */
  void *pin = tes_malloc(16); /* the small segment stays this heap's */
  REQUIRE(pin != NULL, "malloc");

  /* 1. Retired pages go before fresh large memory is written. */
  for (size_t i = 0; i < SMALL_COUNT; i++) {
    small[i] = tes_malloc(SMALL);
    REQUIRE(small[i] != NULL, "small %zu", i);
    memset(small[i], 1, SMALL);
  }
  for (size_t i = 0; i < SMALL_COUNT; i++) tes_free(small[i]);
  size_t pages = SMALL_BYTES / tes_os_page_size();
  size_t before = small_resident();
  REQUIRE(before >= pages * 3 / 4, "only %zu of %zu small OS pages resident after the frees: nothing to measure",
          before, pages);
  tes_stats_t s0, s1;
  tes_stats_get(&s0);
  void *large[2];
  for (int i = 0; i < 2; i++) {
    large[i] = tes_malloc(LARGE);
    REQUIRE(large[i] != NULL, "large %d", i);
    memset(large[i], 2, LARGE);
  }
  tes_stats_get(&s1);
  size_t after = small_resident();
  printf("small pages resident: %zu before the large blocks, %zu after (of %zu); madvise %" PRIu64 "\n", before,
         after, pages, s1.os_madvise_calls - s0.os_madvise_calls);
  CHECK(after <= pages / 4, "%zu of %zu small OS pages still resident after 4 MiB of fresh large blocks", after,
        pages);
  for (int i = 0; i < 2; i++) tes_free(large[i]);

  /* 2. A segment taken dirty from the cache: its pages wait (the heap
   * carves them next), a fresh large block does not purge them. */
  tes_free(pin);
  tes_collect(true);
  void *medium = tes_malloc(100 * 1024); /* a medium segment, written over */
  REQUIRE(medium != NULL, "medium");
  memset(medium, 3, 100 * 1024);
  tes_segment_t *seg = tes_segment_of(medium);
  tes_free(medium); /* its segment empties: to the cache, dirty */
  void *first = tes_malloc(SMALL); /* a small segment wanted: the cached one, dirty */
  REQUIRE(first != NULL, "small");
  CHECK(tes_segment_of(first) == seg, "the small segment is the cached medium one (%p, want %p)",
        (void *)tes_segment_of(first), (void *)seg);
  size_t dirty_before = tes_os_resident_pages((uint8_t *)seg + ((size_t)512 << 10), (size_t)512 << 10);
  void *fresh = tes_malloc(LARGE);
  REQUIRE(fresh != NULL, "large");
  memset(fresh, 4, LARGE);
  size_t dirty_after = tes_os_resident_pages((uint8_t *)seg + ((size_t)512 << 10), (size_t)512 << 10);
  printf("uncarved dirty pages of the reused segment: %zu resident before the large block, %zu after\n",
         dirty_before, dirty_after);
  CHECK(dirty_before == 0 || dirty_after == dirty_before, "the uncarved pages were purged: %zu -> %zu resident",
        dirty_before, dirty_after);
  tes_free(fresh);
  tes_free(first);

  /* 3. The hold needs evidence (the clock's own time: one purge delay of
   * the default 25 ms is enough for the retakes to count as soon). */
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 25) == 0, "the default delay");
  int64_t now = tes_os_clock_ms();
  CHECK(!tes_purge_growth_held(now), "held before any retake");
  tes_purge_note_growth(now, (size_t)8 << 20);
  tes_purge_note_retake(-now, (size_t)64 << 10);
  CHECK(!tes_purge_growth_held(tes_os_clock_ms()), "one retaken 64 KiB page held the growth purge off");
  for (int i = 1; i < 16; i++) tes_purge_note_retake(-now, (size_t)64 << 10);
  CHECK(!tes_purge_growth_held(tes_os_clock_ms()), "1 MiB retaken of 8 MiB purged (an eighth) held it off");
  /* (Part 1 purged 4 MiB in the same window: 12 MiB purged in all.) */
  for (int i = 0; i < 112; i++) tes_purge_note_retake(-now, (size_t)64 << 10);
  CHECK(tes_purge_growth_held(tes_os_clock_ms()), "8 MiB retaken of about 12 MiB purged did not hold it off");
  return unit_finish("unit_large_growth_purge");
}
