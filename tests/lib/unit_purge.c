/* unit_purge.c — the purge delay in effect (src/purge.c): it starts at
 * TESSERA_PURGE_DELAY_MS; a retake of purged memory soon after its purge
 * doubles it (once per base delay however many retakes come together, at
 * most 4 times the base); a retake long after, or after a forced purge,
 * changes nothing; a second without a premature retake halves it; with the
 * base at 0 nothing adapts. Then the same through the real paths: pages
 * purged and retaken by malloc, a cached large segment purged and retaken;
 * tes_purge_pending_ms before and after a purge. */
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

/* The rules on a clock of the test's own (tes_purge_note_retake_at and
 * tes_purge_delay take the time): with the real one and sleeps, a thread
 * that lost its core for 25 ms in a burst, or slept 950 ms longer than
 * asked, failed the test on a loaded machine. t is ms from `start`. */
static int64_t start;
static long delay_at(int64_t t) { return (long)tes_purge_delay(start + t); }
static void retake_at(int64_t purged, int64_t t) { tes_purge_note_retake_at(purged ? start + purged : 0, start + t); }

static void check_rules(void) {
  start = tes_os_clock_ms() + 10 * 1000; /* after anything the library saw */
  /* Calm seconds step the delay the tests before raised back to the base,
   * one level a second (at most two levels). */
  for (int64_t t = -3000; t < 0; t += 1000) delay_at(t);
  CHECK(delay_at(0) == BASE, "start: %ld", delay_at(0));

  /* A retake long after its purge (10 delays), and one after a forced
   * purge (purged_at 0): not premature. */
  retake_at(-10 * BASE, 0);
  retake_at(0, 0);
  CHECK(delay_at(0) == BASE, "after late and forced retakes: %ld", delay_at(0));

  /* Premature: doubled; the rest of the same burst (within a base delay)
   * counts once. */
  retake_at(-1, 0);
  CHECK(delay_at(0) == 2 * BASE, "after one premature retake: %ld", delay_at(0));
  for (int i = 0; i < 100; i++) retake_at(i % BASE - 1, i % BASE);
  CHECK(delay_at(BASE - 1) == 2 * BASE, "a burst raised it to %ld", delay_at(BASE - 1));

  /* A base delay later: doubled again, then capped at 4 times. */
  retake_at(BASE + 4, BASE + 5);
  CHECK(delay_at(BASE + 5) == 4 * BASE, "second premature retake: %ld", delay_at(BASE + 5));
  retake_at(2 * BASE + 9, 2 * BASE + 10);
  CHECK(delay_at(2 * BASE + 10) == 4 * BASE, "above the cap: %ld", delay_at(2 * BASE + 10));

  /* Premature is judged against the delay in effect: a retake 5 delays
   * (of 100 ms) after its purge is not, and leaves the calm clock alone. */
  int64_t last = 2 * BASE + 10; /* the last premature retake */
  retake_at(last - 5 * 4 * BASE, last);

  /* Calm: one step down per second without a premature retake, and the
   * step restarts the calm clock. */
  CHECK(delay_at(last + 999) == 4 * BASE, "down before a calm second: %ld", delay_at(last + 999));
  CHECK(delay_at(last + 1000) == 2 * BASE, "after a calm second: %ld", delay_at(last + 1000));
  CHECK(delay_at(last + 1001) == 2 * BASE, "a second read went down again: %ld", delay_at(last + 1001));
  CHECK(delay_at(last + 2000) == BASE, "after two calm seconds: %ld", delay_at(last + 2000));
  CHECK(delay_at(last + 3000) == BASE, "below the base: %ld", delay_at(last + 3000));

  /* Base 0 (purge at once): nothing adapts. */
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 0);
  retake_at(last + 3000, last + 3001);
  CHECK(delay_at(last + 3001) == 0, "eager purging adapted to %ld", delay_at(last + 3001));
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, BASE);
  CHECK(delay_at(last + 3001) == BASE, "back at the base: %ld", delay_at(last + 3001));
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
  int64_t retake_start = tes_os_clock_ms();
  for (int i = 0; i < COUNT; i++)
    if (i % KEEP_EVERY != 0) {
      blocks[i] = malloc(512);
      REQUIRE(blocks[i] != NULL, "malloc");
      memset(blocks[i], 2, 512);
    }
  /* The retakes are one burst, which doubles the delay once, when they take
   * less than a base delay; a loaded machine can stretch them over two
   * bursts (a second doubling, as the rules above say), never more. */
  int64_t retake_ms = tes_os_clock_ms() - retake_start;
  long delay = tes_purge_delay_current();
  if (retake_ms < BASE)
    CHECK(delay == 2 * BASE, "pages purged and retaken at once: delay %ld", delay);
  else
    CHECK(delay == 2 * BASE || delay == 4 * BASE, "pages purged and retaken over %lld ms: delay %ld",
          (long long)retake_ms, delay);
  for (int i = 0; i < COUNT; i++) free(blocks[i]);
}

/* A large block's segment: cached at free, purged when due, and taken again
 * by the next large malloc. */
static void check_segment(void) {
  tes_collect(true); /* an empty segment cache; forced purges are not judged */
  /* check_pages may leave the delay at its cap (a loaded machine spreads its
   * retakes over two bursts), where no retake can double it: wait for the
   * calm rule's step down (one a second) so that the doubling is seen. */
  for (int waited = 0; tes_purge_delay_current() >= 4 * BASE && waited < 3000; waited += 10) sleep_ms(10);
  long before = tes_purge_delay_current();
  REQUIRE(before < 4 * BASE, "the delay stayed at its cap %ld for 3 s", before);
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

/* tes_purge_pending_ms: -1 with nothing waiting; a freed large block's
 * cached segment waits at most the delay in effect; 0 once that has
 * passed; -1 again once tes_collect(false) has run the due purge
 * (tests/lib/api_rss.c settles on it). */
static void check_pending(void) {
  tes_collect(true);
  CHECK(tes_purge_pending_ms() == -1, "nothing freed, yet a purge waits %ld ms", tes_purge_pending_ms());
  char *p = malloc(2 << 20);
  REQUIRE(p != NULL, "malloc");
  memset(p, 1, 2 << 20);
  free(p);
  long wait = tes_purge_pending_ms(), delay = tes_purge_delay_current();
  CHECK(wait >= 0 && wait <= delay, "a cached segment: pending %ld ms, delay %ld", wait, delay);
  sleep_ms(wait + 2);
  CHECK(tes_purge_pending_ms() == 0, "past its due time: pending %ld ms", tes_purge_pending_ms());
  tes_collect(false);
  CHECK(tes_purge_pending_ms() == -1, "purged: pending %ld ms", tes_purge_pending_ms());
}

int main(void) {
  tes_process_init();
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, BASE);
  check_pages();
  check_segment();
  check_pending();
  check_rules(); /* last: it leaves the adaptive state dated in the future */
  return unit_finish("unit_purge");
}
