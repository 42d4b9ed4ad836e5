/* unit_large_pack.c — packed large blocks (src/large.c, TESSERA_LARGE_PACK=1):
 * blocks up to 1 MiB share a 4 MiB host segment in runs of 64 KiB granules;
 * lookups (usable size, free, realloc) find each block's own header; an
 * interior pointer is not a block; a freed run is reused without a new
 * mapping; calloc in a reused run is zeroed; realloc stays in place within
 * the run and moves beyond it (contents kept); a cached 4 MiB segment (what
 * emptied small, medium or large segments leave) becomes a host; freed dirty
 * runs are purged after the purge delay, and a forced collect gives the
 * empty host back; calloc clears a host the cache purged with MADV_FREE. */
#include "unit_common.h"

#include "internal.h"

#include <sys/mman.h>

#define UNIT_BASE(p) ((uintptr_t)(p) & ~(uintptr_t)TES_SEGMENT_MASK)

/* Resident pages among the whole pages of [p, p + n). */
static size_t resident_pages(const void *p, size_t n) {
  size_t page = tes_os_page_size();
  uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
  static unsigned char vec[4096];
  size_t count = (hi - lo) / page, resident = 0;
  if (count > sizeof vec || mincore((void *)lo, hi - lo, vec) != 0) return SIZE_MAX;
  for (size_t i = 0; i < count; i++) resident += vec[i] & 1;
  return resident;
}

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_LARGE_PACK, 1) == 0, "large_pack 1 accepted");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 3600000) == 0, "an hour's purge delay");
  tes_collect(true);
  tes_stats_t s0, s1;

  /* Two blocks share one host; each has its own segment header. */
  unsigned char *a = tes_malloc(200000), *b = tes_malloc(300000);
  REQUIRE(a != NULL && b != NULL, "two packed blocks");
  CHECK(UNIT_BASE(a) == UNIT_BASE(b), "200,000 and 300,000 bytes in different units: %p %p", (void *)a, (void *)b);
  CHECK(tes_segmap_get(a) == 3, "a host unit is %u in the segment map, want 3", tes_segmap_get(a));
  CHECK(((uintptr_t)a & 63) == 0 && ((uintptr_t)b & 63) == 0, "packed blocks 64-byte aligned: %p %p", (void *)a,
        (void *)b);
  CHECK(tes_usable_size(a) == 200704, "usable %zu of a 200,000-byte block", tes_usable_size(a));
  CHECK(tes_usable_size(b) == 303104, "usable %zu of a 300,000-byte block", tes_usable_size(b));
  tes_segment_t *sa = tes_segment_find(a), *sb = tes_segment_find(b);
  CHECK(sa != NULL && sb != NULL && sa != sb, "each block its own segment header: %p %p", (void *)sa, (void *)sb);
  CHECK(sa != NULL && tes_segment_find(a + 199999) == sa, "the last byte of a is found in a's segment");
  CHECK(tes_usable_size(a + 4096) == 0, "an interior pointer is not a block");
  CHECK(tes_usable_size((uint8_t *)UNIT_BASE(a) + 1000) == 0, "the host's own header is not a block");
  memset(a, 0x11, 200000);
  memset(b, 0x22, 300000);

  /* A freed run is taken again without a new mapping, and calloc zeroes it. */
  tes_free(a);
  tes_stats_get(&s0);
  unsigned char *c = tes_calloc(1, 190000);
  tes_stats_get(&s1);
  REQUIRE(c != NULL, "calloc(190000)");
  CHECK(c == a, "the freed run was not taken again (%p then %p)", (void *)a, (void *)c);
  CHECK(s1.os_mmap_calls == s0.os_mmap_calls, "a packed block after a free called mmap");
  size_t nonzero = 0;
  for (size_t i = 0; i < 190000; i++) nonzero += c[i] != 0;
  CHECK(nonzero == 0, "calloc in a reused run: %zu bytes not zero", nonzero);

  /* realloc: in place within the run, moved (contents kept) beyond it, to
   * a segment of its own beyond 1 MiB. */
  unsigned char *r = tes_realloc(b, 320000);
  CHECK(r == b, "realloc within the run moved the block");
  r = tes_realloc(r, 700000);
  REQUIRE(r != NULL, "realloc(700000)");
  size_t wrong = 0;
  for (size_t i = 0; i < 300000; i++) wrong += r[i] != 0x22;
  CHECK(wrong == 0, "realloc beyond the run: %zu bytes lost", wrong);
  memset(r, 0x33, 700000);
  r = tes_realloc(r, 3000000);
  REQUIRE(r != NULL, "realloc(3000000)");
  CHECK(tes_segmap_get(r) == 1, "a 3,000,000-byte block has a segment of its own (map %u)", tes_segmap_get(r));
  wrong = 0;
  for (size_t i = 0; i < 700000; i++) wrong += r[i] != 0x33;
  CHECK(wrong == 0, "realloc to a segment of its own: %zu bytes lost", wrong);
  tes_free(c);

  /* The freed 3,000,000-byte block leaves a 4 MiB segment in the cache: a
   * new host takes it (no new mapping) once the spare host is in use. */
  unsigned char *fill[9];
  for (int i = 0; i < 9; i++) {
    fill[i] = tes_malloc(400000); /* nine fill a host (7 granules each, 63 a host) */
    REQUIRE(fill[i] != NULL, "tes_malloc(400000)");
    memset(fill[i], 0, 400000);
  }
  uintptr_t first_host = UNIT_BASE(fill[0]);
  uintptr_t big = UNIT_BASE(r);
  tes_free(r);
  tes_stats_get(&s0);
  unsigned char *next = tes_malloc(400000);
  tes_stats_get(&s1);
  REQUIRE(next != NULL, "a ninth block");
  CHECK(UNIT_BASE(fill[8]) == first_host, "nine 400,000-byte blocks fill one host");
  CHECK(UNIT_BASE(next) == big, "the cached 4 MiB segment did not become a host (%p in a unit at %p)", (void *)next,
        (void *)big);
  CHECK(s1.os_mmap_calls == s0.os_mmap_calls, "a host when a 4 MiB segment was cached called mmap");

  /* Freed dirty runs wait for the purge delay (an hour here), and a forced
   * collect gives them back: their pages leave RSS while the host stays. */
  unsigned char *gone = fill[0];
  for (int i = 0; i < 4; i++) tes_free(fill[i]);
  tes_collect(false);
  CHECK(resident_pages(gone, 400000) > 90, "a freed run purged before its delay (%zu pages resident)",
        resident_pages(gone, 400000));
  tes_collect(true);
  CHECK(resident_pages(gone, 400000) == 0, "a freed run still resident after a forced collect (%zu pages)",
        resident_pages(gone, 400000));
  CHECK(UNIT_BASE(fill[4]) == first_host && fill[4][0] == 0 && tes_usable_size(fill[4]) == 401408,
        "the host's live blocks after the purge");

  /* Everything freed and collected: no large block, the hosts unmapped. */
  for (int i = 4; i < 9; i++) tes_free(fill[i]);
  tes_free(next);
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(s1.large_in_use.current == 0, "large_in_use %ld after freeing every block", (long)s1.large_in_use.current);
  CHECK(tes_segmap_get((void *)first_host) == 0, "the first host is still in the segment map");
  /* A host from a segment the cache purged with MADV_FREE, whose pages may
   * still hold their data: calloc clears them. */
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DECOMMIT, 0) == 0, "purge_decommit 0");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 0) == 0, "purge delay 0");
  unsigned char *old = tes_malloc(3000000);
  REQUIRE(old != NULL, "tes_malloc(3000000)");
  memset(old, 0x77, 3000000);
  tes_free(old); /* cached, purged at once with MADV_FREE */
  unsigned char *fresh = tes_calloc(1, 900000);
  REQUIRE(fresh != NULL, "calloc(900000)");
  CHECK(UNIT_BASE(fresh) == UNIT_BASE(old), "the cached segment did not become a host");
  nonzero = 0;
  for (size_t i = 0; i < 900000; i++) nonzero += fresh[i] != 0;
  CHECK(nonzero == 0, "calloc in a host purged with MADV_FREE: %zu bytes not zero", nonzero);
  tes_free(fresh);
  tes_collect(true);
  return unit_finish("unit_large_pack");
}
