/* unit_pack_host_head.c — a packed-block host (src/large.c) gives its
 * segment back to the cache saying truly what it holds. No block takes a
 * host's granule 0, so what the segment held there before it became a
 * host stays; a host whose granules were all purged went back with its
 * dirty_end at its first page, which tells the next user (a small
 * segment: tes_segment_obtain, `zero`) that the rest reads as zero. The
 * small segment then left its page descriptors beyond the first page
 * unwritten, and adopting it read the old bytes as pages in use (fuzz.api,
 * twenty-fifth session: UBSan, class index 229 out of a bins array of 64).
 * The invariant checked: a segment the cache hands out with dirty_end at
 * most a page reads as zero from there to the end of granule 0. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#define UNIT_BASE(p) ((uintptr_t)(p) & ~(uintptr_t)TES_SEGMENT_MASK)
#define GRANULE ((size_t)1 << TES_PACK_GRANULE_SHIFT)

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_LARGE_PACK, 1) == 0, "large_pack 1 accepted");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 3600000) == 0, "an hour's purge delay");
  tes_collect(true); /* an empty cache: the segment below is the one taken next */
  size_t page = tes_os_page_size();

  /* A 4 MiB segment with data in granule 0 past its first page (a small
   * segment's page descriptors, or a large block's bytes), to the cache. */
  tes_segment_t *seg = tes_segment_obtain(TES_SEGMENT_SIZE, TES_SEGMENT_SIZE);
  REQUIRE(seg != NULL, "a segment");
  memset((uint8_t *)seg + page, 0xE5, GRANULE - page);
  seg->dirty_end = seg->size;
  tes_segment_free(seg);

  /* It becomes a host of a packed block, which goes; a forced purge purges
   * every granule of the empty host and sends it to the cache. */
  void *block = tes_malloc(200000);
  REQUIRE(block != NULL, "a packed block");
  REQUIRE(UNIT_BASE(block) == (uintptr_t)seg, "the block's host %p is not the cached segment %p",
          (void *)UNIT_BASE(block), (void *)seg);
  tes_free(block);
  tes_large_purge_tails(true);

  tes_segment_t *again = tes_segment_obtain(TES_SEGMENT_SIZE, TES_SEGMENT_SIZE);
  REQUIRE(again == seg, "the host did not come back from the cache (%p, want %p)", (void *)again, (void *)seg);
  size_t nonzero = 0;
  if (again->dirty_end <= page)
    for (size_t i = page; i < GRANULE; i++) nonzero += ((uint8_t *)again)[i] != 0;
  CHECK(nonzero == 0, "dirty_end %zu says zero beyond the first page, but %zu bytes of granule 0 are not",
        again->dirty_end, nonzero);
  printf("dirty_end %zu after the host's life\n", again->dirty_end);
  tes_segment_free(again);
  return unit_finish("unit_pack_host_head");
}
