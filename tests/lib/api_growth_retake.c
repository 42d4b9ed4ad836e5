/* api_growth_retake.c — a program whose phases alternate between small and
 * medium blocks does not take its small pages back through page faults in
 * every phase (twenty-fourth session, trace24).
 *
 * A heap about to write a fresh segment purges the retired pages of the
 * other page size first (heap.c, tes_heap_purge_for_growth): they cannot
 * serve the request, and waiting they add to the new segment's memory. When
 * the program wants them again at once, each of their OS pages comes back
 * through a page fault: traces-cmu-classic (small and medium traces in turn)
 * took 2,639 such faults in the passes after the first, 13% of the row's
 * time. Its pages now carry their purge time, and one taken back within
 * four purge delays holds the growth purge off for a second (purge.c,
 * tes_purge_growth_held): the pages wait for their timed purge instead.
 *
 * Each round writes 3 MiB of 64-byte blocks and frees them (one small block
 * stays live throughout, so their segment stays), then writes 8 MiB of 48
 * KiB blocks that stay live, so that every round maps a fresh medium
 * segment. The purge delay is 5 s, so no timed purge runs. Round 1's
 * small pages are purged for round 1's medium segment and faulted in again
 * in round 2 (a premature purge); after that they stay resident: rounds 3
 * and 4 fault in at most a quarter of them (before: all of them, each
 * round). The hold lasts a second from round 2's retake: rounds 3 and 4
 * take a few tens of milliseconds. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define ROUNDS 4
#define SMALL_SIZE 64
#define SMALL_COUNT (3 * MIB / SMALL_SIZE)
#define MEDIUM_SIZE (48 * 1024)
#define MEDIUM_COUNT (8 * MIB / MEDIUM_SIZE)
#define SMALL_PAGES (3 * MIB / 4096)

static void *small[SMALL_COUNT];
static void *medium[ROUNDS][MEDIUM_COUNT];

static long minor_faults(void) {
  struct rusage u;
  REQUIRE(getrusage(RUSAGE_SELF, &u) == 0, "getrusage failed");
  return u.ru_minflt;
}

int main(void) {
  REQUIRE(api_allocator_is_tessera(), "libtessera does not serve malloc");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 5000) == 0, "cannot set the purge delay");
  /* A small block that stays: the small segment stays this heap's (a
   * segment whose every page retired goes to the segment cache, and may
   * come back as the medium one). */
  void *pin = malloc(16);
  REQUIRE(pin != NULL, "malloc failed");
  long faults[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    long before = minor_faults();
    api_malloc_written(small, SMALL_COUNT, SMALL_SIZE, 1);
    faults[r] = minor_faults() - before;
    for (size_t i = 0; i < SMALL_COUNT; i++) free(small[i]);
    api_malloc_written(medium[r], MEDIUM_COUNT, MEDIUM_SIZE, 2);
  }
  printf("small phase faults by round: %ld %ld %ld %ld (3 MiB: %ld OS pages)\n", faults[0], faults[1], faults[2],
         faults[3], (long)SMALL_PAGES);
  REQUIRE(faults[0] >= SMALL_PAGES / 2, "the first round faulted %ld pages: nothing to measure", faults[0]);
  REQUIRE(faults[1] >= SMALL_PAGES / 2,
          "the second round faulted %ld pages: the first one's small pages were not purged for the medium "
          "segment, nothing to measure",
          faults[1]);
  REQUIRE(faults[2] + faults[3] <= SMALL_PAGES / 2,
          "rounds 3 and 4 faulted %ld pages: the small pages were purged for every medium segment and taken "
          "back each time",
          faults[2] + faults[3]);
  for (int r = 0; r < ROUNDS; r++)
    for (size_t i = 0; i < MEDIUM_COUNT; i++) free(medium[r][i]);
  free(pin);
  printf("ok\n");
  return 0;
}
