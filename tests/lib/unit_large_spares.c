/* unit_large_spares.c — empty hosts of packed large blocks (src/large.c,
 * TESSERA_LARGE_PACK=1): up to eight stay on the host list as spares when
 * their last block goes (the ninth and later go to the segment cache); an
 * empty host's granules are all purged once it has been empty for a purge
 * delay, including those freed after the host's purge was scheduled; a
 * 4 MiB segment wanted when the cache has none (a small or medium heap's)
 * is a spare, not a new mapping; a forced collect sends the spares to the
 * cache. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <sys/mman.h>
#include <unistd.h>

#define UNIT_BASE(p) ((uintptr_t)(p) & ~(uintptr_t)TES_SEGMENT_MASK)
#define BLOCK 900000 /* 15 granules with its header: four a host */
enum { HOSTS = 12, PER_HOST = 4 };

/* Resident pages among the whole pages of [p, p + n) (os.c's mincore count). */
static size_t resident_pages(const void *p, size_t n) {
  uintptr_t page = tes_os_page_size(), lo = ((uintptr_t)p + page - 1) & ~(page - 1);
  return tes_os_resident_pages((void *)lo, (((uintptr_t)p + n) & ~(page - 1)) - lo);
}

int main(void) {
  /* Packing is on by default since the twenty-fifth session (foot25: with
   * a large block's growth purge, footprint peaks at 116 MB packed against
   * 117-133 MB with a segment a block, in 30% less of its large phase's
   * time; docs/PERFORMANCE.md). A change of default must change this line
   * and the four layout tests' settings (tests/lib/CMakeLists.txt). */
  if (getenv("TESSERA_LARGE_PACK") == NULL)
    CHECK(tes_option_get(TES_OPTION_LARGE_PACK) == 1, "large_pack defaults to %ld, want 1",
          tes_option_get(TES_OPTION_LARGE_PACK));
  REQUIRE(tes_option_set(TES_OPTION_LARGE_PACK, 1) == 0, "large_pack 1 accepted");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 3600000) == 0, "an hour's purge delay");
  tes_collect(true);
  tes_stats_t s0, s1;

  /* 1. Twelve full hosts emptied: eight stay, four go to the cache. */
  static unsigned char *blocks[HOSTS * PER_HOST];
  for (int i = 0; i < HOSTS * PER_HOST; i++) {
    blocks[i] = tes_malloc(BLOCK);
    REQUIRE(blocks[i] != NULL, "block %d", i);
    memset(blocks[i], 0x5a, BLOCK);
  }
  size_t hosts = 0;
  for (int i = 0; i < HOSTS * PER_HOST; i++) {
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) seen = UNIT_BASE(blocks[j]) == UNIT_BASE(blocks[i]);
    hosts += !seen;
  }
  REQUIRE(hosts == HOSTS, "%d blocks of %d bytes in %zu hosts, want %d", HOSTS * PER_HOST, BLOCK, hosts, HOSTS);
  size_t cached = tes_cache_count();
  for (int i = 0; i < HOSTS * PER_HOST; i++) tes_free(blocks[i]);
  CHECK(tes_cache_count() == cached + HOSTS - 8, "emptied hosts cached: %zu, want %d (eight spares)",
        tes_cache_count() - cached, HOSTS - 8);
  /* The spares are reused without a mapping. */
  tes_stats_get(&s0);
  for (int i = 0; i < 8 * PER_HOST; i++) blocks[i] = tes_malloc(BLOCK);
  tes_stats_get(&s1);
  CHECK(s1.os_mmap_calls == s0.os_mmap_calls, "blocks in eight spares called mmap %llu times",
        (unsigned long long)(s1.os_mmap_calls - s0.os_mmap_calls));
  for (int i = 0; i < 8 * PER_HOST; i++) tes_free(blocks[i]);

  /* 2. A forced collect sends every spare to the cache (and the cache
   * unmaps them). */
  tes_collect(true);
  CHECK(tes_cache_count() == 0, "%zu segments cached after a forced collect", tes_cache_count());
  CHECK(tes_segmap_get(blocks[0]) == 0, "a spare host still mapped after a forced collect");

  /* 3. A unit wanted with none cached: the spare is it, no mmap. */
  unsigned char *one = tes_malloc(BLOCK);
  REQUIRE(one != NULL, "one block");
  uintptr_t spare = UNIT_BASE(one);
  tes_free(one);
  CHECK(tes_cache_count() == 0, "the only empty host went to the cache");
  tes_stats_get(&s0);
  tes_segment_t *unit = tes_segment_obtain(TES_SEGMENT_SIZE, TES_SEGMENT_SIZE);
  tes_stats_get(&s1);
  REQUIRE(unit != NULL, "a 4 MiB segment");
  CHECK((uintptr_t)unit == spare, "the spare host %#lx was not the unit (%p)", (unsigned long)spare, (void *)unit);
  CHECK(s1.os_mmap_calls == s0.os_mmap_calls, "a unit with a spare host called mmap");
  tes_segment_free(unit);
  tes_collect(true);

  /* 4. An empty host is purged whole once empty for a delay: its first
   * block's free set its due with that run aging; the runs freed after it
   * are purged at that due too, the host having been empty since. */
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 20) == 0, "a 20 ms purge delay");
  for (int i = 0; i < PER_HOST; i++) {
    blocks[i] = tes_malloc(BLOCK);
    REQUIRE(blocks[i] != NULL && UNIT_BASE(blocks[i]) == UNIT_BASE(blocks[0]), "block %d in the first host", i);
    memset(blocks[i], 0x6b, BLOCK);
  }
  for (int i = 0; i < PER_HOST; i++) tes_free(blocks[i]);
  size_t before = 0;
  for (int i = 1; i < PER_HOST; i++) before += resident_pages(blocks[i], BLOCK);
  CHECK(before > 600, "the freed runs purged before their delay (%zu pages resident)", before);
  usleep(200 * 1000); /* 2.5 times the longest delay the adaptation allows (4 x 20 ms) */
  tes_collect(false); /* what is due, not forced */
  size_t after = 0;
  for (int i = 1; i < PER_HOST; i++) after += resident_pages(blocks[i], BLOCK);
  CHECK(after == 0, "runs of an empty host freed after its due was set: %zu pages resident a delay later", after);
  CHECK(tes_segmap_get(blocks[0]) == 3, "the empty host left the host list (map %u)", tes_segmap_get(blocks[0]));
  tes_collect(true);
  return unit_finish("unit_large_spares");
}
