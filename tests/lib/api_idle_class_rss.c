/* api_idle_class_rss.c — a size class the program stopped using gives its
 * last page back (fifteenth session).
 *
 * The head page (512 KiB) of each of the 16 medium classes (10-128 KiB) is
 * filled with blocks written in full, which are freed; then the program
 * goes on with small blocks only, taking slow paths, for 40 purge delays
 * (the delay may double twice). Before, each emptied head stayed its
 * class's head, written and resident, until a malloc_trim (RSS stayed
 * 4 MiB above the start); now it retires and is purged: RSS must come back
 * within 2 MiB of the start. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELAY_MS 10
#define SMALL_LIVE 256

static void *small[SMALL_LIVE];
static void *medium[64];

/* Small churn that takes the malloc slow path: 256 KiB of 1 KiB blocks
 * allocated and freed, so their pages run out and retire in turn. */
static void small_churn(void) {
  for (size_t i = 0; i < SMALL_LIVE; i++) {
    small[i] = malloc(1024);
    REQUIRE(small[i] != NULL, "malloc failed");
  }
  for (size_t i = 0; i < SMALL_LIVE; i++) free(small[i]);
}

int main(void) {
  REQUIRE(api_allocator_is_tessera(), "libtessera does not serve malloc");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, DELAY_MS) == 0, "cannot set the purge delay");
  double settled = api_now_seconds() + 40 * DELAY_MS * 1e-3;
  while (api_now_seconds() < settled) small_churn();
  int64_t before = api_rss_bytes();
  /* Each class's head page (512 KiB) filled with blocks written in full,
   * then all of them freed. */
  size_t size = 10 * 1024;
  for (int c = 0; c < 16; c++, size += size / 4 < 2048 ? 2048 : size / 4) {
    size_t n = (512 * 1024) / size;
    for (size_t i = 0; i < n; i++) {
      medium[i] = malloc(size);
      REQUIRE(medium[i] != NULL, "malloc failed");
      memset(medium[i], 1, size);
    }
    for (size_t i = 0; i < n; i++) free(medium[i]);
  }
  int64_t with_heads = api_rss_bytes();
  double end = api_now_seconds() + 10 * DELAY_MS * 1e-3 * 4; /* the delay may double twice */
  while (api_now_seconds() < end) small_churn();
  int64_t after = api_rss_bytes();
  printf("rss: before %.2f MiB, medium blocks freed %.2f MiB, after %d purge delays of small blocks %.2f MiB\n",
         (double)before / MIB, (double)with_heads / MIB, 40, (double)after / MIB);
  REQUIRE(with_heads - before >= 4 * MIB, "the medium blocks did not add to RSS: nothing to measure");
  REQUIRE(after - before <= 2 * MIB, "RSS %.2f MiB above the start: the idle classes' heads stayed",
          (double)(after - before) / MIB);
  printf("ok\n");
  return 0;
}
