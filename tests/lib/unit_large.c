/* unit_large.c — large blocks (src/large.c): page-rounded usable size, the
 * segment cache (a freed large block's segment is reused without a new
 * mmap), realloc in place while the segment has room, growth by mremap with
 * contents kept, calloc zeroing a reused segment, and large-block alignment. */
#include "unit_common.h"

#include "internal.h"

/* Resident bytes of this process (/proc/self/statm's second field). */
static long resident_bytes(void) {
  long pages = -1, size;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f != NULL) {
    if (fscanf(f, "%ld %ld", &size, &pages) != 2) pages = -1;
    fclose(f);
  }
  return pages * (long)tes_os_page_size();
}

int main(void) {
  tes_stats_t s0, s1;
  size_t page = tes_os_page_size();

  unsigned char *p = tes_malloc(300000);
  REQUIRE(p != NULL, "malloc(300000)");
  CHECK(tes_usable_size(p) == (300000 + page - 1) / page * page, "usable %zu", tes_usable_size(p));
  CHECK(((uintptr_t)p & 63) == 0, "large block not 64-byte aligned: %p", (void *)p);
  memset(p, 0x5a, 300000);

  /* Free + malloc of a similar size: the cached segment comes back. */
  tes_free(p);
  tes_stats_get(&s0);
  unsigned char *q = tes_malloc(250000);
  tes_stats_get(&s1);
  CHECK(q == p, "cached large segment not reused (%p then %p)", (void *)p, (void *)q);
  CHECK(s1.os_mmap_calls == s0.os_mmap_calls, "reuse from the cache still called mmap");

  /* calloc on a reused (dirty) segment is zeroed. */
  tes_free(q);
  unsigned char *z = tes_calloc(1, 280000);
  REQUIRE(z != NULL, "calloc");
  size_t nonzero = 0;
  for (size_t i = 0; i < 280000; i++) nonzero += z[i] != 0;
  CHECK(nonzero == 0, "calloc on a reused segment left %zu non-zero bytes", nonzero);

  /* realloc in place while the segment has room: 280,000 bytes are mapped
   * as 512 KiB (large.c, mapping_size). */
  z[0] = 1;
  z[279999] = 2;
  tes_stats_get(&s0);
  unsigned char *r = tes_realloc(z, 500000);
  tes_stats_get(&s1);
  CHECK(r == z, "realloc within the segment moved the block");
  CHECK(s1.realloc_in_place == s0.realloc_in_place + 1, "realloc_in_place not counted");
  CHECK(s1.os_mremap_calls == s0.os_mremap_calls, "growth within the mapping called mremap");
  CHECK(r[0] == 1 && r[279999] == 2, "contents lost on in-place growth");
  CHECK(tes_usable_size(r) >= 500000, "usable %zu after growth", tes_usable_size(r));
  r = tes_realloc(r, 3000000); /* beyond its mapping: mremap */
  REQUIRE(r != NULL, "realloc to 3,000,000");
  CHECK(r[0] == 1 && r[279999] == 2, "contents lost on growth past the mapping");

  /* Beyond the segment: mremap, contents kept. */
  r[2999999] = 3;
  tes_stats_get(&s0);
  unsigned char *g = tes_realloc(r, (size_t)40 << 20);
  tes_stats_get(&s1);
  REQUIRE(g != NULL, "realloc to 40 MiB");
  CHECK(g[0] == 1 && g[279999] == 2 && g[2999999] == 3, "contents lost by mremap growth");
  CHECK(s1.huge_remaps == s0.huge_remaps + 1 && s1.os_mremap_calls > s0.os_mremap_calls, "growth not done by mremap");
  CHECK(tes_segment_find(g + ((size_t)39 << 20)) == tes_segment_of(g), "the grown segment is not mapped whole");
  memset(g, 7, (size_t)40 << 20);

  /* Shrinking a large block stays in place. */
  unsigned char *s = tes_realloc(g, (size_t)1 << 20);
  CHECK(s == g && s[0] == 7 && s[(1 << 20) - 1] == 7, "large shrink moved or lost data");
  /* Down to a small size: moves to a small class, keeps the prefix. */
  unsigned char *t = tes_realloc(s, 100);
  CHECK(t != NULL && t[0] == 7 && t[99] == 7 && tes_segment_of(t)->kind != TES_SEG_LARGE,
        "large -> small realloc");
  tes_free(t);

  /* Aligned large blocks. */
  for (size_t a = 4096; a <= ((size_t)8 << 20); a *= 4) {
    void *al = tes_aligned_alloc(a, 500000);
    CHECK(al && ((uintptr_t)al & (a - 1)) == 0, "aligned_alloc(%zu, 500000) = %p", a, al);
    tes_free(al);
  }

  /* A large segment is mapped only as far as its block needs: walks that
   * follow links from blocks another thread may be reusing (statistics,
   * tes_heap_visit) must not take an address in the rest of its 4 MiB unit
   * for a small block (they read it: SIGSEGV when they did). */
  {
    unsigned char *big = tes_malloc(200000);
    unsigned char *small = tes_malloc(48);
    REQUIRE(big != NULL && small != NULL, "malloc");
    CHECK(tes_segment_of(big)->size < TES_SEGMENT_SIZE, "a 200,000-byte block mapped %zu bytes",
          tes_segment_of(big)->size);
    CHECK(!tes_maybe_small_block((unsigned char *)tes_segment_of(big) + ((size_t)1 << 20)),
          "an address past a large segment's mapping passes for a small block");
    CHECK(tes_maybe_small_block(small), "a small block does not pass");
    tes_free(big);
    tes_free(small);
  }

  /* A cached segment taken by a smaller block keeps its dirty tail until the
   * purge delay has passed (before, it was purged at once: a system call,
   * and a page fault per page when a larger block took the segment again);
   * a forced collect purges it, and a realloc that grows into the tail takes
   * it off the list first, so the purge never reaches into the block. */
  {
    long delay = tes_option_get(TES_OPTION_PURGE_DELAY_MS);
    REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 60000) == 0, "purge delay");
    tes_collect(true);
    size_t big_size = (size_t)3500 << 10, small_size = (size_t)600 << 10; /* small maps 1 MiB: up to 4 MiB taken */
    unsigned char *big = tes_malloc(big_size);
    REQUIRE(big != NULL, "malloc(3.5 MiB)");
    memset(big, 1, big_size);
    tes_free(big);
    tes_stats_get(&s0);
    unsigned char *small = tes_malloc(small_size);
    tes_stats_get(&s1);
    REQUIRE(small == big, "the 3.5 MiB block's cached segment was not taken (%p then %p)", (void *)big,
            (void *)small);
    CHECK(s1.os_madvise_calls == s0.os_madvise_calls, "the dirty tail was purged at once (%llu madvise calls)",
          (unsigned long long)(s1.os_madvise_calls - s0.os_madvise_calls));
    CHECK(tes_large_tail_due() != INT64_MAX, "no tail purge pending");
    tes_stats_get(&s0);
    tes_large_purge_tails(true);
    tes_stats_get(&s1);
    CHECK(s1.os_madvise_calls == s0.os_madvise_calls + 1 && s0.committed.current - s1.committed.current >= (2 << 20),
          "the forced purge gave back %lld bytes in %llu calls",
          (long long)(s0.committed.current - s1.committed.current),
          (unsigned long long)(s1.os_madvise_calls - s0.os_madvise_calls));
    CHECK(tes_segment_of(small)->dirty_end <= small_size + ((size_t)64 << 10), "dirty_end %zu after the purge",
          tes_segment_of(small)->dirty_end);
    /* Again, and the block grows in place into the tail before it is due. */
    memset(small, 2, small_size);
    tes_free(small);
    big = tes_malloc(big_size);
    REQUIRE(big == small, "segment not taken again");
    memset(big, 3, big_size);
    tes_free(big);
    small = tes_malloc(small_size);
    REQUIRE(small == big, "segment not taken a third time");
    memset(small, 4, small_size);
    unsigned char *grown = tes_realloc(small, big_size);
    REQUIRE(grown == small, "realloc did not grow in place");
    memset(grown + small_size, 5, big_size - small_size);
    tes_large_purge_tails(true);
    size_t wrong = 0;
    for (size_t i = 0; i < big_size; i++) wrong += grown[i] != (i < small_size ? 4 : 5);
    CHECK(wrong == 0, "the tail purge reached into the grown block: %zu bytes lost", wrong);
    tes_free(grown);
    tes_option_set(TES_OPTION_PURGE_DELAY_MS, delay);
  }

  /* calloc in a reused segment whose last block wrote one page: the
   * untouched pages are not cleared (which made them resident), but given
   * back; the block reads as zero, the written page included. */
  {
    size_t size = (size_t)16 << 20;
    unsigned char *sparse = tes_malloc(size);
    REQUIRE(sparse != NULL, "malloc(16 MiB)");
    memset(sparse + size / 2, 0x77, 100);
    tes_free(sparse);
    long before = resident_bytes();
    unsigned char *zeroed = tes_calloc(1, size);
    long grew = resident_bytes() - before;
    REQUIRE(zeroed == sparse, "calloc did not take the cached segment (%p then %p)", (void *)sparse, (void *)zeroed);
    CHECK(grew < (4 << 20), "calloc made %ld KiB resident for a block whose last user wrote one page", grew >> 10);
    size_t nonzero = 0;
    for (size_t i = 0; i < size; i += 512) nonzero += zeroed[i] != 0;
    for (size_t i = size / 2; i < size / 2 + 100; i++) nonzero += zeroed[i] != 0;
    CHECK(nonzero == 0, "calloc left %zu non-zero bytes", nonzero);
    tes_free(zeroed);
  }

  /* A dirty tail longer than the pending bound (8 MiB with 20 MiB in use:
   * a 29 MiB segment taken by a 20 MiB block, as it may be up to half as
   * large again) waits when few of its pages are resident (the last block
   * wrote its first page only): counted by mincore, it fits. Before, its length
   * counted and it was purged at once, a system call for pages that were
   * not there. A tail that is resident still goes at once. */
  {
    long delay = tes_option_get(TES_OPTION_PURGE_DELAY_MS);
    REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 60000) == 0, "purge delay");
    tes_collect(true);
    size_t big_size = (size_t)29 << 20, small_size = (size_t)20 << 20;
    /* The resident one first: the share of resident tail bytes that counts
     * tails between probes is then still that of the written tails above. */
    for (int written = 1; written >= 0; written--) {
      unsigned char *big = tes_malloc(big_size);
      REQUIRE(big != NULL, "malloc(29 MiB)");
      if (written) memset(big, 1, big_size);
      else big[0] = 1;
      tes_free(big);
      tes_stats_get(&s0);
      unsigned char *small = tes_malloc(small_size);
      tes_stats_get(&s1);
      REQUIRE(small == big, "the 29 MiB block's cached segment was not taken (%p then %p)", (void *)big,
              (void *)small);
      unsigned long long calls = s1.os_madvise_calls - s0.os_madvise_calls;
      if (written) {
        CHECK(calls == 1, "a resident 9 MiB tail over the bound was not purged at once (%llu madvise calls)",
              calls);
      } else {
        CHECK(calls == 0, "a tail with no page resident was purged at once (%llu madvise calls)", calls);
        CHECK(tes_large_tail_due() != INT64_MAX, "the tail is not pending");
        tes_stats_get(&s0);
        tes_large_purge_tails(true);
        tes_stats_get(&s1);
        CHECK(s1.os_madvise_calls == s0.os_madvise_calls + 1, "the forced purge made %llu madvise calls",
              (unsigned long long)(s1.os_madvise_calls - s0.os_madvise_calls));
      }
      tes_free(small);
      tes_collect(true);
    }
    tes_option_set(TES_OPTION_PURGE_DELAY_MS, delay);
  }

  /* tes_collect(true) drops the cache: the reserved space goes back. */
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(s1.large_in_use.current == 0, "large_in_use %ld after freeing every large block",
        (long)s1.large_in_use.current);
  return unit_finish("unit_large");
}
