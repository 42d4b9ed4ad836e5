/* api_phase_rss.c — a program whose small blocks give way to medium ones
 * does not hold both (fifteenth session), nor when they give way back to
 * small ones (twenty-sixth session, rss26).
 *
 * 32 MiB of 4 KiB blocks are written and freed, except one block in every
 * 64th small page, which keeps every small segment in use: the freed pages
 * are retired inside those segments and wait for their purge. Then 32 MiB of
 * 48 KiB blocks (a medium class: pages of their own size, which the small
 * segments cannot give) are written. The purge delay is set to 60 s, so no
 * purge falls due during the test: what waits must be given back when the
 * heap writes new segments for the medium blocks. RSS with the medium blocks
 * live must stay within 40 MiB of the start (they are 32 MiB and pages of
 * the kept blocks' pages); before, the retired small pages stayed too
 * (about 64 MiB). */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_SIZE 4096
#define SMALL_COUNT (32 * MIB / SMALL_SIZE)
#define KEEP_EVERY 512 /* a segment holds 63 pages of 16 blocks: two kept blocks in each */
#define MEDIUM_SIZE (48 * 1024)
#define MEDIUM_COUNT (32 * MIB / MEDIUM_SIZE)

static void *small[SMALL_COUNT];
static void *again[SMALL_COUNT];
static void *medium[MEDIUM_COUNT];

int main(void) {
  REQUIRE(api_allocator_is_tessera(), "libtessera does not serve malloc");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 60000) == 0, "cannot set the purge delay");
  int64_t start = api_rss_bytes();
  api_malloc_written(small, SMALL_COUNT, SMALL_SIZE, 1);
  for (size_t i = 0; i < SMALL_COUNT; i++)
    if (i % KEEP_EVERY != 0) free(small[i]);
  int64_t after_small = api_rss_bytes();
  api_malloc_written(medium, MEDIUM_COUNT, MEDIUM_SIZE, 2);
  int64_t with_medium = api_rss_bytes();
  printf("rss: start %.1f MiB, small freed %.1f MiB, medium live %.1f MiB\n", (double)start / MIB,
         (double)after_small / MIB, (double)with_medium / MIB);
  REQUIRE(with_medium - start <= (int64_t)(40 * MIB),
          "RSS grew by %.1f MiB with 32 MiB of medium blocks live: the retired small pages stayed resident",
          (double)(with_medium - start) / MIB);

  /* The medium blocks freed, their segments go whole to the segment cache,
   * still resident (nothing falls due). Small blocks again: the small
   * segments' free pages were purged above, and carving them faulted 32 MiB
   * in beside the 32 MiB waiting in the cache; a page take that would fault
   * now takes a resident cached segment first. RSS with the second small
   * phase live must stay within 48 MiB of the start (32 MiB of blocks, the
   * kept blocks' pages, the bins' medium blocks); before, about 64 MiB. */
  for (size_t i = 0; i < MEDIUM_COUNT; i++) free(medium[i]);
  int64_t medium_freed = api_rss_bytes();
  api_malloc_written(again, SMALL_COUNT, SMALL_SIZE, 3);
  int64_t with_small = api_rss_bytes();
  printf("rss: medium freed %.1f MiB, small again live %.1f MiB\n", (double)medium_freed / MIB,
         (double)with_small / MIB);
  REQUIRE(with_small - start <= (int64_t)(48 * MIB),
          "RSS grew by %.1f MiB with 32 MiB of small blocks live again: purged small pages were faulted in "
          "beside the resident cached segments",
          (double)(with_small - start) / MIB);
  for (size_t i = 0; i < SMALL_COUNT; i++) free(again[i]);
  for (size_t i = 0; i < SMALL_COUNT; i += KEEP_EVERY) free(small[i]);
  printf("ok\n");
  return 0;
}
