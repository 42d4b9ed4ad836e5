/* unit_cache.c — the segment cache (src/segment.c): a freed large block's
 * segment waits there and is handed out again newest first, one of exactly
 * the mapping size asked before a larger one, and none of more than four
 * times that size (below 4 MiB); TESSERA_SEGMENT_CACHE bounds
 * how many wait (the oldest are unmapped first), up to its maximum of
 * TES_SEGMENT_CACHE_MAX; a forced purge unmaps every one. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <errno.h>
#include <sys/mman.h>

/* Mapping sizes (large.c): 200,000 bytes map 256 KiB, 300,000 map 512 KiB,
 * 600,000 map 1 MiB, 1,500,000 map 2 MiB. */
#define SMALL_LARGE 200000
#define BIGGER_LARGE 600000
#define HALF_LARGE 300000
#define MUCH_BIGGER_LARGE 1500000

static bool mapped(const void *seg) { return msync((void *)seg, 4096, MS_ASYNC) == 0 || errno != ENOMEM; }

static tes_segment_t *segment_freed(size_t size) {
  void *p = tes_malloc(size);
  REQUIRE(p != NULL, "tes_malloc(%zu)", size);
  tes_segment_t *seg = tes_segment_of(p);
  tes_free(p);
  return seg;
}

static void exact_size_first(void) {
  void *a = tes_malloc(SMALL_LARGE), *b = tes_malloc(BIGGER_LARGE);
  REQUIRE(a && b, "large blocks");
  tes_segment_t *sa = tes_segment_of(a), *sb = tes_segment_of(b);
  tes_free(a);
  tes_free(b); /* the newest, and large enough for the next request too */
  CHECK(tes_cache_count() == 2, "%zu cached, want 2", tes_cache_count());
  void *c = tes_malloc(SMALL_LARGE);
  CHECK(tes_segment_of(c) == sa, "took %p, want the exact-size segment %p (not %p)", (void *)tes_segment_of(c),
        (void *)sa, (void *)sb);
  void *d = tes_malloc(SMALL_LARGE);
  CHECK(tes_segment_of(d) == sb, "took %p, want the larger cached segment %p", (void *)tes_segment_of(d), (void *)sb);
  CHECK(tes_cache_count() == 0, "%zu cached, want 0", tes_cache_count());
  tes_free(c);
  tes_free(d);
}

/* A cached segment of more than four times the mapping asked is not taken:
 * the block gets a mapping of its own (before, any segment up to 4 MiB was
 * taken, and in `mixed` the large blocks' segments ratcheted up in size and
 * grew dirty over their whole length: 84 MB peak RSS against 62 MB). */
static void not_much_larger(void) {
  tes_cache_purge(true);
  tes_segment_t *big = segment_freed(MUCH_BIGGER_LARGE);
  CHECK(tes_cache_count() == 1, "%zu cached, want 1", tes_cache_count());
  void *p = tes_malloc(SMALL_LARGE);
  REQUIRE(p != NULL, "tes_malloc(%d)", SMALL_LARGE);
  CHECK(tes_segment_of(p) != big, "a %d-byte block took the cached 2 MiB segment", SMALL_LARGE);
  CHECK(tes_segment_of(p)->size == ((size_t)256 << 10), "a %d-byte block has %zu bytes", SMALL_LARGE,
        tes_segment_of(p)->size);
  CHECK(tes_cache_count() == 1, "%zu cached, want the 2 MiB segment still", tes_cache_count());
  void *q = tes_malloc(HALF_LARGE); /* four times its mapping: still taken */
  REQUIRE(q != NULL, "tes_malloc(%d)", HALF_LARGE);
  CHECK(tes_segment_of(q) == big, "a %d-byte block did not take the cached 2 MiB segment", HALF_LARGE);
  tes_free(p);
  tes_free(q);
  tes_cache_purge(true);
}

static void newest_first(void) {
  tes_cache_purge(true);
  tes_segment_t *older = segment_freed(SMALL_LARGE);
  void *keep = tes_malloc(SMALL_LARGE); /* so that the next block cannot reuse `older` */
  (void)older;
  tes_segment_t *newer = segment_freed(SMALL_LARGE);
  void *p = tes_malloc(SMALL_LARGE);
  CHECK(tes_segment_of(p) == newer, "took %p, want the newest %p", (void *)tes_segment_of(p), (void *)newer);
  tes_free(p);
  tes_free(keep);
}

/* `count` large blocks live at once, then freed oldest first. */
static void free_many(tes_segment_t **segs, size_t count) {
  void **blocks = mmap(NULL, count * sizeof *blocks, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(blocks != MAP_FAILED, "mmap");
  for (size_t i = 0; i < count; i++) {
    blocks[i] = tes_malloc(SMALL_LARGE);
    REQUIRE(blocks[i] != NULL, "block %zu", i);
    segs[i] = tes_segment_of(blocks[i]);
  }
  for (size_t i = 0; i < count; i++) tes_free(blocks[i]);
  munmap(blocks, count * sizeof *blocks);
}

static void bounded(void) {
  tes_cache_purge(true);
  REQUIRE(tes_option_set(TES_OPTION_SEGMENT_CACHE, 4) == 0, "segment_cache 4");
  tes_segment_t *segs[7];
  free_many(segs, 7);
  CHECK(tes_cache_count() == 4, "%zu cached, want 4", tes_cache_count());
  for (int i = 0; i < 3; i++) CHECK(!mapped(segs[i]), "segment %d (among the oldest) still mapped", i);
  for (int i = 3; i < 7; i++) CHECK(mapped(segs[i]), "segment %d (among the newest) unmapped", i);
  tes_cache_purge(true);
  CHECK(tes_cache_count() == 0, "%zu cached after a forced purge", tes_cache_count());
  for (int i = 3; i < 7; i++) CHECK(!mapped(segs[i]), "segment %d mapped after a forced purge", i);
}

static void at_the_maximum(void) {
  CHECK(tes_option_set(TES_OPTION_SEGMENT_CACHE, TES_SEGMENT_CACHE_MAX + 1) == EINVAL, "above the maximum accepted");
  REQUIRE(tes_option_set(TES_OPTION_SEGMENT_CACHE, TES_SEGMENT_CACHE_MAX) == 0, "segment_cache at its maximum");
  enum { EXTRA = 6, COUNT = TES_SEGMENT_CACHE_MAX + EXTRA };
  static tes_segment_t *segs[COUNT];
  free_many(segs, COUNT);
  CHECK(tes_cache_count() == TES_SEGMENT_CACHE_MAX, "%zu cached, want %d", tes_cache_count(), TES_SEGMENT_CACHE_MAX);
  for (int i = 0; i < EXTRA; i++) CHECK(!mapped(segs[i]), "segment %d (among the oldest) still mapped", i);
  for (int i = EXTRA; i < COUNT; i++)
    if (!mapped(segs[i])) {
      CHECK(false, "segment %d unmapped while the cache had room", i);
      break;
    }
  /* All taken back without a new mapping: each block lands in one of them. */
  static void *again[TES_SEGMENT_CACHE_MAX];
  for (int i = 0; i < TES_SEGMENT_CACHE_MAX; i++) {
    again[i] = tes_malloc(SMALL_LARGE);
    REQUIRE(again[i] != NULL, "block %d", i);
  }
  CHECK(tes_cache_count() == 0, "%zu left in the cache", tes_cache_count());
  CHECK(tes_segment_of(again[0]) == segs[COUNT - 1], "the first block again did not take the newest segment");
  for (int i = 0; i < TES_SEGMENT_CACHE_MAX; i++) tes_free(again[i]);
  tes_cache_purge(true);
  CHECK(tes_cache_count() == 0, "%zu cached after a forced purge", tes_cache_count());
}

int main(void) {
  tes_option_set(TES_OPTION_PURGE_THREAD, 0); /* nothing purges behind the checks' backs */
  tes_cache_purge(true);
  exact_size_first();
  not_much_larger();
  newest_first();
  bounded();
  at_the_maximum();
  return unit_finish("unit_cache");
}
