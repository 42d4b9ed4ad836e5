/* unit_pack_invariants.c — the invariants of packed large blocks' hosts
 * (src/large.c, TESSERA_LARGE_PACK=1; docs/RELIABILITY.md, twenty-sixth
 * session, rev26), checked on the host's table (internal.h,
 * tes_pack_host_t) after every step of the paths that change it: blocks
 * taken and freed in runs of every length, calloc in reused runs, realloc
 * in place, over the next free granules, shrunk, moved to another run and
 * to a segment of its own, aligned blocks, purges of aging granules and
 * the recommit of purged ones, a first-class heap destroyed, a fork child;
 * and that heap visits and the large in-use statistic see packed blocks
 * as they are.
 *
 *   P1 free_mask is within TES_PACK_ALL (granule 0 is the host's header);
 *      dirty_mask, purged_mask and aging_mask are within free_mask.
 *   P2 `starts` has a bit only where a live block's run starts (never
 *      granule 0), and the runs (their headers' sizes) cover exactly the
 *      granules not free, each run within the host and at most 1 MiB.
 *   P3 each block lies in its run: header, then the block at 512 bytes,
 *      usable bytes to the run's end at most; its own purged_bytes 0
 *      (its granules' purged bytes are the host's).
 *   P4 a free granule not in dirty_mask reads as zero (calloc skips it).
 *   P5 the host's purged_bytes are its purged granules' bytes, and granule
 *      0's beyond its first page when the cache purged the segment.
 *   P6 free dirty granules have a due (`due` != 0): else nothing purges
 *      them but a forced collect. A free racing a purge that found nothing
 *      aging left them so (the free peeked at the host's due, unlocked,
 *      saw it set and did not read the clock; the purge then cleared it
 *      before the free took the lock), and so did a forced purge whose
 *      madvise failed: fault.pack_release_purge and fault.pack_purge_failed
 *      (tests/fault) make those two interleavings happen. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNIT_BASE(p) ((uintptr_t)(p) & ~(uintptr_t)TES_SEGMENT_MASK)
#define GRANULE ((size_t)1 << TES_PACK_GRANULE_SHIFT)
#define KiB ((size_t)1 << 10)

static tes_segment_t *host_of(const void *p) { return (tes_segment_t *)UNIT_BASE(p); }

/* P1-P6 on the host of block p (its table read without large_lock: the
 * test is the only thread but for `race`, which checks after joining). */
static void check_host(const void *p, const char *when) {
  tes_segment_t *host = host_of(p);
  REQUIRE(tes_segmap_get(host) == TES_UNIT_HOST, "%s: %p is not in a host", when, p);
  tes_pack_host_t *h = tes_pack_host_table(host);
  uint64_t starts = atomic_load(&h->starts), held = TES_PACK_ALL & ~h->free_mask;
  CHECK((h->free_mask & ~TES_PACK_ALL) == 0, "%s: P1 free_mask %#llx has granule 0", when,
        (unsigned long long)h->free_mask);
  CHECK((h->dirty_mask & ~h->free_mask) == 0 && (h->purged_mask & ~h->free_mask) == 0 &&
            (h->aging_mask & ~h->free_mask) == 0,
        "%s: P1 dirty %#llx purged %#llx aging %#llx not within free %#llx", when, (unsigned long long)h->dirty_mask,
        (unsigned long long)h->purged_mask, (unsigned long long)h->aging_mask, (unsigned long long)h->free_mask);
  CHECK((starts & 1) == 0 && (starts & h->free_mask) == 0, "%s: P2 starts %#llx in granule 0 or a free granule",
        when, (unsigned long long)starts);
  uint64_t covered = 0;
  for (uint64_t left = starts; left != 0; left &= left - 1) {
    unsigned g = (unsigned)__builtin_ctzll(left);
    tes_segment_t *seg = (tes_segment_t *)((uint8_t *)host + ((size_t)g << TES_PACK_GRANULE_SHIFT));
    size_t granules = seg->size >> TES_PACK_GRANULE_SHIFT;
    bool whole = seg->size % GRANULE == 0 && granules >= 1 && g + granules <= 64 && seg->size <= ((size_t)1 << 20);
    CHECK(whole, "%s: P2 the run at granule %u has size %zu", when, g, seg->size);
    if (!whole) continue;
    uint64_t run = (granules == 64 ? ~(uint64_t)0 : (((uint64_t)1 << granules) - 1)) << g;
    CHECK((covered & run) == 0, "%s: P2 the run at granule %u overlaps another", when, g);
    covered |= run;
    tes_page_t *page = &seg->pages[0];
    CHECK(seg->kind == TES_SEG_LARGE && seg->large_offset == TES_LARGE_OFFSET &&
              page->area == (uint8_t *)seg + TES_LARGE_OFFSET && TES_LARGE_OFFSET + page->block_size <= seg->size,
          "%s: P3 the block at granule %u: offset %zu, usable %zu in a run of %zu", when, g,
          (size_t)seg->large_offset, (size_t)page->block_size, seg->size);
    CHECK(seg->purged_bytes == 0, "%s: P3 the block at granule %u counts %zu purged bytes", when, g,
          seg->purged_bytes);
    CHECK(tes_segment_find(page->area) == seg, "%s: P2 the block at granule %u is not found", when, g);
  }
  CHECK(covered == held, "%s: P2 runs cover %#llx, the granules held are %#llx", when, (unsigned long long)covered,
        (unsigned long long)held);
  for (unsigned g = 1; g < 64; g++) {
    if (!(h->free_mask >> g & 1) || (h->dirty_mask >> g & 1)) continue;
    const uint64_t *w = (const uint64_t *)((uint8_t *)host + ((size_t)g << TES_PACK_GRANULE_SHIFT));
    size_t nonzero = 0;
    for (size_t i = 0; i < GRANULE / 8; i++) nonzero += w[i] != 0;
    CHECK(nonzero == 0, "%s: P4 granule %u is free and clean but %zu words are not zero", when, g, nonzero);
  }
  size_t page_size = tes_os_page_size();
  size_t purged = (size_t)__builtin_popcountll(h->purged_mask) << TES_PACK_GRANULE_SHIFT;
  CHECK(host->purged_bytes == purged || host->purged_bytes == purged + GRANULE - page_size,
        "%s: P5 the host counts %zu purged bytes, its purged granules are %zu", when, host->purged_bytes, purged);
  CHECK((h->free_mask & h->dirty_mask) == 0 || h->due != 0,
        "%s: P6 free dirty granules %#llx and no due", when, (unsigned long long)(h->free_mask & h->dirty_mask));
}

static unsigned char *take(size_t size, unsigned char fill) {
  unsigned char *p = tes_malloc(size);
  REQUIRE(p != NULL, "tes_malloc(%zu)", size);
  memset(p, fill, size);
  return p;
}

static size_t count_not(const unsigned char *p, size_t n, unsigned char value) {
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += p[i] != value;
  return wrong;
}

/* The largest block a run of g granules holds: whole pages after the header. */
static size_t fits(unsigned granules) { return granules * GRANULE - 4 * KiB; }

struct large_seen {
  size_t count, bytes;
};
static bool visit_large(const tes_block_info_t *block, void *arg) {
  struct large_seen *seen = arg;
  if (block->size_class == UINT32_MAX && tes_segmap_get(block->address) == TES_UNIT_HOST) {
    seen->count++;
    seen->bytes += block->usable_size;
  }
  return true;
}

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_LARGE_PACK, 1) == 0, "large_pack 1 accepted");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 3600000) == 0, "an hour's purge delay");
  tes_collect(true); /* no spare host, an empty cache */

  /* Runs of every length from 3 to 16 granules (two hold a medium block
   * at most), in three hosts. */
  static unsigned char *blocks[17];
  for (unsigned g = 3; g <= 16; g++) blocks[g] = take(fits(g), (unsigned char)g);
  for (unsigned g = 3; g <= 16; g++) check_host(blocks[g], "runs of 3-16 granules");
  /* Visits and statistics see each packed block at its address with its
   * usable bytes (whole pages to the run's end at most). */
  struct large_seen seen = {0};
  tes_heap_visit(NULL, visit_large, &seen);
  size_t usable = 0;
  for (unsigned g = 3; g <= 16; g++) {
    usable += tes_usable_size(blocks[g]);
    CHECK(tes_usable_size(blocks[g]) == fits(g), "usable %zu of a block of %zu", tes_usable_size(blocks[g]), fits(g));
  }
  CHECK(seen.count == 14 && seen.bytes == usable, "the visit saw %zu large blocks of %zu bytes, want 14 of %zu",
        seen.count, seen.bytes, usable);
  tes_stats_t stats;
  tes_stats_get(&stats);
  CHECK(stats.large_in_use.current == (int64_t)usable, "large_in_use %lld, the blocks' usable bytes %zu",
        (long long)stats.large_in_use.current, usable);
  /* Every other one freed: dirty free runs between live ones. */
  for (unsigned g = 4; g <= 16; g += 2) {
    tes_free(blocks[g]);
    blocks[g] = NULL;
    for (unsigned odd = 3; odd <= 15; odd += 2) check_host(blocks[odd], "every other run freed");
  }
  /* calloc in the dirty runs: zero, and the table still true. */
  for (unsigned g = 4; g <= 16; g += 2) {
    unsigned char *c = tes_calloc(1, fits(g) - 100);
    REQUIRE(c != NULL, "calloc");
    CHECK(count_not(c, fits(g) - 100, 0) == 0, "calloc of %zu in a reused run is not zero", fits(g) - 100);
    check_host(c, "calloc in a reused run");
    memset(c, 0x5c, fits(g) - 100);
    blocks[g] = c;
  }
  for (unsigned g = 3; g <= 16; g++) tes_free(blocks[g]);
  tes_collect(true);

  /* realloc: within the run, over the next free granules (dirty ones
   * among them), shrunk, moved to another run, moved beyond 1 MiB. */
  unsigned char *a = take(fits(3), 0xa1), *b = take(fits(4), 0xb1), *c = take(fits(3), 0xc1);
  REQUIRE(host_of(a) == host_of(c), "three blocks in one host");
  tes_free(b); /* four dirty free granules after a */
  unsigned char *r = tes_realloc(a, fits(3) - 5000);
  CHECK(r == a, "realloc within the run moved");
  check_host(c, "realloc shrunk within the run");
  r = tes_realloc(a, fits(6));
  CHECK(r == a, "realloc over the next free granules moved the block");
  CHECK(count_not(r, fits(3) - 5000, 0xa1) == 0, "realloc in place lost bytes");
  check_host(c, "realloc grown over dirty free granules");
  memset(r, 0xa2, fits(6));
  r = tes_realloc(r, fits(8)); /* c is in the way: moved */
  REQUIRE(r != NULL, "realloc");
  CHECK(count_not(r, fits(6), 0xa2) == 0, "realloc to another run lost bytes");
  check_host(c, "realloc moved to another run");
  unsigned char *z = tes_calloc(1, fits(7)); /* the run it left, dirty, reused by calloc */
  REQUIRE(z != NULL, "calloc");
  CHECK(count_not(z, fits(7), 0) == 0, "calloc over a moved block's run is not zero");
  check_host(c, "calloc over a moved block's run");
  r = tes_realloc(r, 3 * ((size_t)1 << 20));
  REQUIRE(r != NULL, "realloc to 3 MiB");
  CHECK(tes_segmap_get(r) == TES_UNIT_START, "a 3 MiB block is in a host");
  check_host(c, "realloc moved beyond 1 MiB");
  tes_free(r);
  tes_free(z);

  /* Aligned: 512 bytes is a packed block's own alignment, more is not packed. */
  void *al = tes_memalign(512, 300 * KiB), *al2 = tes_memalign(1024, 300 * KiB);
  REQUIRE(al != NULL && al2 != NULL, "memalign");
  CHECK(((uintptr_t)al & 511) == 0 && tes_segmap_get(al) == TES_UNIT_HOST, "memalign(512) not packed: %p", al);
  CHECK(((uintptr_t)al2 & 1023) == 0 && tes_segmap_get(al2) == TES_UNIT_START, "memalign(1024) packed: %p", al2);
  check_host(al, "an aligned block");
  tes_free(al);
  tes_free(al2);

  /* Purges: freed granules age for a delay (0 here), then go; purged
   * granules are counted in the host's purged_bytes and taken back. */
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 0) == 0, "purge delay 0");
  unsigned char *d = take(fits(5), 0xd1);
  tes_collect(true); /* the due an hour away goes (runs freed after a due wait for it) */
  tes_free(c);
  tes_collect(false);
  check_host(d, "aging granules purged");
  tes_pack_host_t *h = tes_pack_host_table(host_of(d));
  CHECK(h->purged_mask != 0, "nothing purged after the delay (dirty %#llx)", (unsigned long long)h->dirty_mask);
  unsigned char *e = tes_calloc(1, fits(3));
  REQUIRE(e != NULL, "calloc");
  CHECK(count_not(e, fits(3), 0) == 0, "calloc in purged granules is not zero");
  check_host(d, "purged granules taken again");
  tes_free(e);
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 3600000) == 0, "an hour's purge delay");

  /* A first-class heap's packed blocks go with tes_heap_destroy. */
  tes_heap_t *heap = tes_heap_new();
  REQUIRE(heap != NULL, "tes_heap_new");
  for (int i = 0; i < 4; i++) memset(tes_heap_malloc(heap, fits(3)), 0x77, fits(3));
  tes_heap_destroy(heap);
  check_host(d, "a heap's packed blocks destroyed");

  /* A fork child frees and takes runs in the hosts it inherited. */
  unsigned char *f = take(fits(9), 0xf1);
  int failures_before = unit_failures;
  pid_t child = fork();
  REQUIRE(child >= 0, "fork");
  if (child == 0) {
    tes_free(f);
    unsigned char *g = take(fits(4), 0x99);
    check_host(d, "a fork child");
    tes_free(g);
    check_host(d, "a fork child, after its frees");
    _exit(unit_failures == failures_before ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the fork child's checks failed (status %d)", status);
  tes_free(f);
  check_host(d, "after the fork");
  tes_free(d);
  tes_collect(true);

  return unit_finish("unit_pack_invariants");
}
