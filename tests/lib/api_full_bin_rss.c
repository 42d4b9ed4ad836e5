/* api_full_bin_rss.c — a loop that fits its bins, with no malloc slow path,
 * still runs the heap's deferred work: idle classes' heads retire and are
 * purged (review23's probe, twenty-fourth session).
 *
 * As lib.api_idle_class_rss: the head page (512 KiB) of each of the 16
 * medium classes is filled with blocks written in full, which are freed
 * (RSS +3.9-4.4 MiB). Then a loop of 32-byte blocks that never takes a
 * malloc slow path: 64 blocks held, and each round a malloc (the bin's
 * pop), the free of a held block, the free of the block just allocated and
 * a malloc that takes the held block's place. Every malloc pops the bin,
 * so only a free that finds the room at zero (tes_bin_room_out, once in
 * 256 pops) can run the deferred work. The 32-byte bin was grown first
 * (rounds of 5,000 blocks) as a program's would have been; the first flush
 * sets its limit back to 64. Until the twenty-fourth session the room-out
 * read the clock only while some bin was grown: after that flush nothing
 * ran the bins' flush, the queue sweep or the purges again, and the heads
 * stayed resident for good (4.2-4.4 MiB above the start, every run).
 *
 * Modes: grown (the default, as above), no_grow (the same without the
 * grown bin: the heads stayed for good as well) and pingpong (no grown bin,
 * and rounds of malloc(32), free: the bin holds one block at most, and a
 * free finds the room at zero once in 16,384 rounds).
 *
 * Condition-based: the loop goes on until RSS is back within 1 MiB of the
 * start (2-7 purge delays with the fix, 0.02-0.53 MiB above it), and fails
 * only when it has not come back after 400 purge delays of the loop's own
 * activity (active_clock_tick: a machine that stops the test does not
 * count); with the delay doubled twice at most, that is 100 delays in
 * effect. No timing is judged. The hardened build runs it too
 * (lib.api_full_bin_rss.secure): its small classes have no bins, so its
 * loop takes slow paths (3 delays, before and after).
 */
#define _GNU_SOURCE
#include "active_clock.h"
#include "api_check.h"
#include "medium_heads.h"

#include "tessera.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELAY_MS 10
#define HELD 64
#define GROW 5000
#define MOST_DELAYS 400

static char *grow[GROW];
static char *held[HELD];
static unsigned long rounds;

static bool pingpong; /* mode pingpong: the rounds are malloc(32), free */

/* 1,000 rounds at the full bin (4,000 of the ping-pong): no malloc slow path. */
static void full_bin_rounds(void) {
  if (pingpong) {
    for (int k = 0; k < 4000; k++, rounds++) {
      char *x = malloc(32);
      REQUIRE(x != NULL, "malloc failed");
      x[0] = 1;
      free(x);
    }
    return;
  }
  for (int k = 0; k < 1000; k++, rounds++) {
    unsigned i = (unsigned)(rounds % HELD);
    char *x = malloc(32);
    REQUIRE(x != NULL, "malloc failed");
    x[0] = 1;
    free(held[i]);
    free(x);
    held[i] = malloc(32);
    REQUIRE(held[i] != NULL, "malloc failed");
    held[i][0] = 2;
  }
}

/* The rounds for `delays` purge delays of the test's activity. */
static void full_bin_for(int delays) {
  active_clock_t clock;
  active_clock_start(&clock);
  do full_bin_rounds();
  while (active_clock_tick(&clock, DELAY_MS * 0.5e-3) < delays * DELAY_MS * 1e-3);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "grown";
  bool grown = !strcmp(mode, "grown");
  pingpong = !strcmp(mode, "pingpong");
  REQUIRE(grown || pingpong || !strcmp(mode, "no_grow"), "usage: %s [grown|no_grow|pingpong]", argv[0]);
  REQUIRE(api_allocator_is_tessera(), "libtessera does not serve malloc");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, DELAY_MS) == 0, "cannot set the purge delay");
  for (int r = 0; r < (grown ? 4 : 0); r++) { /* the 32-byte bin grows (bin_grow, on the malloc slow path) */
    for (int i = 0; i < GROW; i++) {
      grow[i] = malloc(32);
      REQUIRE(grow[i] != NULL, "malloc failed");
    }
    for (int i = 0; i < GROW; i++) free(grow[i]);
  }
  for (int i = 0; i < HELD; i++) {
    held[i] = malloc(32);
    REQUIRE(held[i] != NULL, "malloc failed");
  }
  int64_t before, with_heads;
  api_fill_medium_heads(full_bin_for, DELAY_MS, 3 * MIB, &before, &with_heads);
  REQUIRE(with_heads - before >= 3 * MIB, "the medium blocks did not add to RSS (%.2f -> %.2f MiB): nothing to measure",
          (double)before / MIB, (double)with_heads / MIB);
  /* The rounds until RSS comes back, or MOST_DELAYS delays of them. */
  active_clock_t clock;
  active_clock_start(&clock);
  int64_t after = api_rss_bytes();
  double active = 0;
  while (after - before > MIB && active < MOST_DELAYS * DELAY_MS * 1e-3) {
    full_bin_rounds();
    active = active_clock_tick(&clock, DELAY_MS * 0.5e-3);
    after = api_rss_bytes();
  }
  printf("%s: rss: before %.2f MiB, medium blocks freed %.2f MiB, after %.0f purge delays of rounds %.2f MiB "
         "(%lu rounds in all; a purge pending: %ld ms)\n",
         mode, (double)before / MIB, (double)with_heads / MIB, active / (DELAY_MS * 1e-3), (double)after / MIB, rounds,
         tes_purge_pending_ms());
  REQUIRE(after - before <= MIB,
          "RSS %.2f MiB above the start after %d purge delays of rounds: the idle classes' heads stayed",
          (double)(after - before) / MIB, MOST_DELAYS);
  for (int i = 0; i < HELD; i++) free(held[i]);
  printf("ok\n");
  return 0;
}
