/* unit_purge.c — the purge delay in effect (src/purge.c): it starts at
 * TESSERA_PURGE_DELAY_MS; a retake of purged memory soon after its purge
 * doubles it (once per base delay however many retakes come together, at
 * most 4 times the base); a retake long after, or after a forced purge,
 * changes nothing; a second without a premature retake halves it; with the
 * base at 0 nothing adapts. Then the same through the real paths: pages
 * purged and retaken by malloc, a cached large segment purged and retaken. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <string.h>
#include <time.h>

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

#define BASE 25

static void check_rules(void) {
  CHECK(tes_purge_delay_current() == BASE, "start: %ld", tes_purge_delay_current());

  /* A retake long after its purge (10 delays), and one after a forced
   * purge (purged_at 0): not premature. */
  tes_purge_note_retake(tes_os_clock_ms() - 10 * BASE);
  tes_purge_note_retake(0);
  CHECK(tes_purge_delay_current() == BASE, "after late and forced retakes: %ld", tes_purge_delay_current());

  /* Premature: doubled; the rest of the same burst counts once. */
  tes_purge_note_retake(tes_os_clock_ms() - 1);
  CHECK(tes_purge_delay_current() == 2 * BASE, "after one premature retake: %ld", tes_purge_delay_current());
  for (int i = 0; i < 100; i++) tes_purge_note_retake(tes_os_clock_ms() - 1);
  CHECK(tes_purge_delay_current() == 2 * BASE, "a burst raised it to %ld", tes_purge_delay_current());

  /* A base delay later: doubled again, then capped at 4 times. */
  sleep_ms(BASE + 5);
  tes_purge_note_retake(tes_os_clock_ms() - 1);
  CHECK(tes_purge_delay_current() == 4 * BASE, "second premature retake: %ld", tes_purge_delay_current());
  sleep_ms(BASE + 5);
  tes_purge_note_retake(tes_os_clock_ms() - 1);
  CHECK(tes_purge_delay_current() == 4 * BASE, "above the cap: %ld", tes_purge_delay_current());

  /* Premature is judged against the delay in effect: a retake 5 delays
   * (of 100 ms) after its purge is not, and leaves the calm clock alone. */
  tes_purge_note_retake(tes_os_clock_ms() - 5 * 4 * BASE);

  /* Calm: one step down per second without a premature retake. */
  sleep_ms(1050);
  CHECK(tes_purge_delay_current() == 2 * BASE, "after a calm second: %ld", tes_purge_delay_current());
  CHECK(tes_purge_delay_current() == 2 * BASE, "a second read went down again: %ld", tes_purge_delay_current());
  sleep_ms(1050);
  CHECK(tes_purge_delay_current() == BASE, "after two calm seconds: %ld", tes_purge_delay_current());
  sleep_ms(1050);
  CHECK(tes_purge_delay_current() == BASE, "below the base: %ld", tes_purge_delay_current());

  /* Base 0 (purge at once): nothing adapts. */
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 0);
  tes_purge_note_retake(tes_os_clock_ms() - 1);
  CHECK(tes_purge_delay_current() == 0, "eager purging adapted to %ld", tes_purge_delay_current());
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, BASE);
  CHECK(tes_purge_delay_current() == BASE, "back at the base: %ld", tes_purge_delay_current());
}

/* Pages: 8 MiB of 512-byte blocks freed but one in 1024, so that most pages
 * retire while every segment keeps a live block (the purges are then of
 * pages, not of whole cached segments); once they are purged (the delay
 * passed, then a slow path), the same again retakes them. */
static void check_pages(void) {
  enum { COUNT = (8 << 20) / 512, KEEP_EVERY = 1024 };
  static void *blocks[COUNT];
  for (int i = 0; i < COUNT; i++) {
    blocks[i] = malloc(512);
    REQUIRE(blocks[i] != NULL, "malloc");
    memset(blocks[i], 1, 512);
  }
  for (int i = 0; i < COUNT; i++)
    if (i % KEEP_EVERY != 0) free(blocks[i]);
  tes_os_counters_t before, after;
  tes_os_counters(&before);
  sleep_ms(tes_purge_delay_current() + 10);
  tes_collect(false); /* the due purges run on a slow path; this is one */
  tes_os_counters(&after);
  CHECK(after.purged_bytes - before.purged_bytes >= (4 << 20), "only %llu bytes purged",
        (unsigned long long)(after.purged_bytes - before.purged_bytes));
  for (int i = 0; i < COUNT; i++)
    if (i % KEEP_EVERY != 0) {
      blocks[i] = malloc(512);
      REQUIRE(blocks[i] != NULL, "malloc");
      memset(blocks[i], 2, 512);
    }
  CHECK(tes_purge_delay_current() == 2 * BASE, "pages purged and retaken at once: delay %ld",
        tes_purge_delay_current());
  for (int i = 0; i < COUNT; i++) free(blocks[i]);
}

/* A large block's segment: cached at free, purged when due, and taken again
 * by the next large malloc. */
static void check_segment(void) {
  tes_collect(true); /* an empty segment cache; forced purges are not judged */
  long before = tes_purge_delay_current();
  char *p = malloc(2 << 20);
  REQUIRE(p != NULL, "malloc");
  memset(p, 1, 2 << 20);
  free(p);
  sleep_ms(before + 10);
  tes_collect(false);
  p = malloc(2 << 20);
  REQUIRE(p != NULL, "malloc");
  CHECK(tes_purge_delay_current() == 2 * before, "segment purged and retaken at once: delay %ld, was %ld",
        tes_purge_delay_current(), before);
  free(p);
}

int main(void) {
  tes_process_init();
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, BASE);
  check_rules();
  check_pages();
  check_segment();
  return unit_finish("unit_purge");
}
