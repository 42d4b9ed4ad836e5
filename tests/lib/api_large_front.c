/* api_large_front.c — a large block placed in a cached segment that held a
 * longer one: the memory the longer block dirtied and the new one does not
 * cover waits one purge delay (large.c, tail_list) instead of being given
 * back at once, a system call and then a page fault per page when a larger
 * block takes the segment again. In the default build that memory is a
 * tail behind the block; in the hardened build, whose large blocks end at
 * their segment's end (before its guard page), it is a front before the
 * block (purge_front). Both builds run this (lib.api_large_front linked with
 * libtessera.a, lib.api_large_front.secure with the hardened library):
 *   - taking the segment makes no madvise call;
 *   - a forced collect gives the waiting memory back (committed drops by
 *     more than 2 MiB in one call) without touching the block;
 *   - a calloc that takes the segment again reads as zero throughout;
 *   - over the pending bound, a resident remainder is given back at once
 *     and an untouched one waits. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#define BIG ((size_t)3500 << 10)
#define SMALL ((size_t)600 << 10) /* maps 1 MiB: takes the 4 MiB cached segment (up to four times its mapping) */

int main(void) {
  API_GROUP("a reused large segment's dirty remainder waits for the purge delay");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 60000) == 0, "purge delay");
  tes_collect(true); /* an empty segment cache: the next free puts the only one there */
  tes_stats_t s0, s1;
  unsigned char *big = malloc(BIG);
  REQUIRE(big != NULL, "malloc(BIG)");
  memset(big, 0xA5, BIG);
  free(big);
  tes_stats_get(&s0);
  unsigned char *small = malloc(SMALL);
  tes_stats_get(&s1);
  REQUIRE(small != NULL, "malloc(SMALL)");
  REQUIRE(s1.os_mmap_calls == s0.os_mmap_calls, "the big block's cached segment was not taken (%llu mmap calls)",
          (unsigned long long)(s1.os_mmap_calls - s0.os_mmap_calls));
  CHECK(s1.os_madvise_calls == s0.os_madvise_calls,
        "the memory the big block left dirty was given back at once (%llu madvise calls)",
        (unsigned long long)(s1.os_madvise_calls - s0.os_madvise_calls));
  memset(small, 0x3C, SMALL);

  API_GROUP("a forced collect gives it back and leaves the block alone");
  tes_stats_get(&s0);
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(s1.os_madvise_calls == s0.os_madvise_calls + 1, "%llu madvise calls",
        (unsigned long long)(s1.os_madvise_calls - s0.os_madvise_calls));
  CHECK(s0.committed.current - s1.committed.current >= (2 << 20), "committed fell by %lld bytes",
        (long long)(s0.committed.current - s1.committed.current));
  size_t wrong = 0;
  for (size_t i = 0; i < SMALL; i++) wrong += small[i] != 0x3C;
  CHECK(wrong == 0, "%zu bytes of the block changed", wrong);

  API_GROUP("calloc in the segment afterwards reads as zero");
  free(small);
  unsigned char *zeroed = calloc(1, BIG);
  REQUIRE(zeroed != NULL, "calloc(BIG)");
  size_t nonzero = 0;
  for (size_t i = 0; i < BIG; i++) nonzero += zeroed[i] != 0;
  CHECK(nonzero == 0, "%zu bytes not zero", nonzero);
  free(zeroed);

  /* What cannot wait (the pending total is bounded: a quarter of the large
   * bytes in use, at least 8 MiB) goes at once. In the hardened build it
   * did not go at all: the front's length was read from the segment before
   * it was recorded there (0), and the front was not on the list either,
   * so it stayed resident while its block lived, through tes_collect(true)
   * too (40 blocks of 300 KiB in 3 MiB segments: 119 MB resident, 11 MiB
   * in use). */
  API_GROUP("beyond the bound of what waits, the remainder goes at once");
  enum { COUNT = 12 };
  unsigned char *blocks[COUNT];
  tes_collect(true);
  for (int i = 0; i < COUNT; i++) {
    blocks[i] = malloc(BIG);
    REQUIRE(blocks[i] != NULL, "malloc(BIG)");
    memset(blocks[i], 0xA5, BIG);
  }
  for (int i = 0; i < COUNT; i++) free(blocks[i]);
  tes_stats_get(&s0);
  for (int i = 0; i < COUNT; i++) {
    blocks[i] = malloc(SMALL);
    REQUIRE(blocks[i] != NULL, "malloc(SMALL)");
    memset(blocks[i], 0x3C, SMALL);
  }
  tes_stats_get(&s1);
  REQUIRE(s1.os_mmap_calls == s0.os_mmap_calls, "the cached segments were not taken (%llu mmap calls)",
          (unsigned long long)(s1.os_mmap_calls - s0.os_mmap_calls));
  /* At most 8 MiB of it waits; the rest is given back now. */
  int64_t remainders = (int64_t)COUNT * (int64_t)(BIG - SMALL), waiting_most = (int64_t)8 << 20;
  CHECK(s0.committed.current - s1.committed.current >= remainders - waiting_most - (2 << 20),
        "committed fell by %lld bytes of the %lld the blocks left (at most %lld may wait)",
        (long long)(s0.committed.current - s1.committed.current), (long long)remainders, (long long)waiting_most);
  tes_stats_get(&s0);
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(s0.committed.current - s1.committed.current <= waiting_most + (2 << 20),
        "a forced collect gave back %lld bytes: more than could wait",
        (long long)(s0.committed.current - s1.committed.current));
  for (int i = 0; i < COUNT; i++) {
    wrong = 0;
    for (size_t j = 0; j < SMALL; j++) wrong += blocks[i][j] != 0x3C;
    CHECK(wrong == 0, "%zu bytes of block %d changed", wrong, i);
    free(blocks[i]);
  }

  /* Over the pending bound (8 MiB with 20 MiB in use: a 29 MiB segment,
   * taken by a 20 MiB block as it may be up to half as large again, leaves
   * 9 MiB dirty): what is resident goes at once, what is not waits
   * (counted by mincore). The hardened build purged nothing at once (its
   * front's length was not set when the bound refused it), and the default
   * build purged the non-resident tail at once. The resident one first, as
   * the share that counts tails between probes is then that of the written
   * ones above. */
  API_GROUP("a remainder over the pending bound: resident goes at once, else it waits");
  for (int written = 1; written >= 0; written--) {
    tes_collect(true);
    unsigned char *huge = malloc((size_t)29 << 20);
    REQUIRE(huge != NULL, "malloc(29 MiB)");
    if (written) memset(huge, 0x5A, (size_t)29 << 20);
    else huge[0] = 1;
    free(huge);
    tes_stats_get(&s0);
    unsigned char *taker = malloc((size_t)20 << 20);
    tes_stats_get(&s1);
    REQUIRE(taker != NULL, "malloc(20 MiB)");
    REQUIRE(s1.os_mmap_calls == s0.os_mmap_calls, "the 29 MiB segment was not taken (%llu mmap calls)",
            (unsigned long long)(s1.os_mmap_calls - s0.os_mmap_calls));
    CHECK(s1.os_madvise_calls == s0.os_madvise_calls + (written ? 1 : 0),
          "%s remainder: %llu madvise calls at malloc", written ? "resident" : "untouched",
          (unsigned long long)(s1.os_madvise_calls - s0.os_madvise_calls));
    tes_stats_get(&s0);
    tes_collect(true);
    tes_stats_get(&s1);
    CHECK(s1.os_madvise_calls == s0.os_madvise_calls + (written ? 0 : 1),
          "%s remainder: %llu madvise calls at the forced collect", written ? "resident" : "untouched",
          (unsigned long long)(s1.os_madvise_calls - s0.os_madvise_calls));
    free(taker);
  }
  return api_finish("api_large_front");
}
