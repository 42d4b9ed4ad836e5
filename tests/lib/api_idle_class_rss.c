/* api_idle_class_rss.c — a size class the program stopped using gives its
 * last page back (fifteenth session).
 *
 * The head page (512 KiB) of each of the 16 medium classes (10-128 KiB) is
 * filled with blocks written in full, which are freed; then the program
 * goes on with small blocks only, taking slow paths, for 40 purge delays
 * (the delay may double twice). Before, each emptied head stayed its
 * class's head, written and resident, until a malloc_trim (RSS stayed
 * 4 MiB above the start); now it retires and is purged: RSS must come back
 * within 2 MiB of the start.
 *
 * Twentieth session: the purges run on slow paths, so both waits count the
 * time the test was making them (active_clock_tick, at most half a delay for
 * a gap between two rounds), not the wall clock: a test the machine stopped
 * running for the window's 400 ms (a loaded machine; under gdb, a 600 ms
 * pause at the window's start) read RSS with the heads still resident
 * (6.04 MiB, 4.32 above the start) and failed. And a fill the machine
 * stopped for more than a delay may let heads retire before RSS is read
 * (nothing to measure): such a round is not judged, it is taken again. */
#define _GNU_SOURCE
#include "api_check.h"
#include "medium_heads.h"

#include "tessera.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELAY_MS 10
#define SMALL_LIVE 256

static void *small[SMALL_LIVE];

/* Small churn that takes the malloc slow path: 256 KiB of 1 KiB blocks
 * allocated and freed, so their pages run out and retire in turn. */
static void small_churn(void) {
  for (size_t i = 0; i < SMALL_LIVE; i++) {
    small[i] = malloc(1024);
    REQUIRE(small[i] != NULL, "malloc failed");
  }
  for (size_t i = 0; i < SMALL_LIVE; i++) free(small[i]);
}

/* Small churn for `delays` purge delays of the test's own activity. */
static void churn_for(int delays) {
  active_clock_t clock;
  active_clock_start(&clock);
  do small_churn();
  while (active_clock_tick(&clock, DELAY_MS * 0.5e-3) < delays * DELAY_MS * 1e-3);
}

int main(void) {
  REQUIRE(api_allocator_is_tessera(), "libtessera does not serve malloc");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, DELAY_MS) == 0, "cannot set the purge delay");
  int64_t before, with_heads;
  /* At least 3 MiB, as api_full_bin_rss asks of the same fill: what the
   * test asserts (back within 2 MiB) then still fails when the heads stay.
   * It asked 4 MiB, and with large blocks packed (the default since the
   * twenty-fifth session) the fill adds 3.98-4.10 MiB on the build machine
   * (4.32 with TESSERA_LARGE_PACK=0): the guard, not the allocator, failed. */
  api_fill_medium_heads(churn_for, DELAY_MS, 3 * MIB, &before, &with_heads);
  churn_for(10 * 4); /* the delay may double twice */
  int64_t after = api_rss_bytes();
  printf("rss: before %.2f MiB, medium blocks freed %.2f MiB, after %d purge delays of small blocks %.2f MiB\n",
         (double)before / MIB, (double)with_heads / MIB, 40, (double)after / MIB);
  REQUIRE(with_heads - before >= 3 * MIB, "the medium blocks did not add to RSS: nothing to measure");
  REQUIRE(after - before <= 2 * MIB, "RSS %.2f MiB above the start: the idle classes' heads stayed",
          (double)(after - before) / MIB);
  printf("ok\n");
  return 0;
}
