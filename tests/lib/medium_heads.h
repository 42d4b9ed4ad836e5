/* medium_heads.h — the idle medium classes of the RSS tests
 * (lib.api_idle_class_rss, lib.api_full_bin_rss): the head page (512 KiB)
 * of each of the 16 medium classes (10-128 KiB) filled with blocks written
 * in full, which are all freed, so that each head is resident and empty. */
#ifndef TESSERA_TESTS_MEDIUM_HEADS_H
#define TESSERA_TESTS_MEDIUM_HEADS_H

#include "api_check.h"

/* `settle(40)` (the test's own activity for 40 purge delays), RSS, the
 * fill, RSS again into *before and *with_heads. A head retires at the
 * second of two sweeps a delay apart after its frees: within one delay
 * none can have, and RSS must show them; a fill that took longer (the
 * machine stopped the test) and added less than `least` bytes is not
 * judged, it is taken again (at most 20 rounds). */
static inline void api_fill_medium_heads(void (*settle)(int delays), int delay_ms, int64_t least, int64_t *before,
                                         int64_t *with_heads) {
  static void *medium[64];
  for (int round = 1;; round++) {
    settle(40);
    *before = api_rss_bytes();
    double start = api_now_seconds();
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
    *with_heads = api_rss_bytes();
    if (*with_heads - *before >= least || api_now_seconds() - start < delay_ms * 1e-3) return;
    printf("round %d: the fill took %.1f ms (the delay is %d): heads may have retired; again\n", round,
           (api_now_seconds() - start) * 1e3, delay_ms);
    REQUIRE(round < 20, "20 rounds, none filled within a purge delay");
  }
}

#endif
