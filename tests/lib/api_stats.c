/* api_stats.c — every tes_stats counter checked on a scripted workload.
 *
 * Each group takes a snapshot with tes_stats_get, performs a known sequence
 * of calls with nothing else allocating in between (no printing inside a
 * window), takes a second snapshot and checks the exact difference the
 * contract in include/tessera.h implies: calls per API counted once per
 * call (a realloc that moves is one realloc call, not a malloc and a free),
 * in_use is the sum of the usable sizes of live blocks, per-class live
 * blocks, cross-thread frees, OS traffic, and the glibc views (mallinfo2,
 * malloc_trim, malloc_stats, malloc_info) agreeing with tes_stats.
 *
 * Linked with libtessera (static, standard names overridden). */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <malloc.h>
#include <pthread.h>

#pragma GCC diagnostic ignored "-Walloc-size-larger-than="

static volatile size_t opaque_size_max = SIZE_MAX;

static tes_stats_t s0, s1;

#define DELTA(field) ((int64_t)(s1.field - s0.field))

static int class_of_size(const tes_stats_t *s, size_t usable) {
  for (uint32_t c = 0; c < s->class_count && c < TES_STATS_MAX_CLASSES; c++)
    if (s->class_block_size[c] == usable) return (int)c;
  return -1;
}

/* One call, counted at once (the contract: merged on demand). */
static void check_single_calls(void) {
  API_GROUP("single calls counted at once");
  tes_stats_get(&s0);
  void *p = malloc(10);
  tes_stats_get(&s1);
  CHECK(DELTA(malloc_calls) == 1, "one malloc: malloc_calls +%" PRId64, DELTA(malloc_calls));
  CHECK(DELTA(in_use.current) == (int64_t)tes_usable_size(p), "one malloc: in_use +%" PRId64 ", want %zu",
        DELTA(in_use.current), tes_usable_size(p));
  tes_stats_get(&s0);
  free(p);
  tes_stats_get(&s1);
  CHECK(DELTA(free_calls) == 1, "one free: free_calls +%" PRId64, DELTA(free_calls));
  tes_stats_get(&s0);
  p = aligned_alloc(64, 100);
  tes_stats_get(&s1);
  CHECK(DELTA(aligned_calls) == 1, "one aligned_alloc: aligned_calls +%" PRId64, DELTA(aligned_calls));
  CHECK(DELTA(malloc_calls) == 0, "one aligned_alloc: malloc_calls +%" PRId64 ", want 0", DELTA(malloc_calls));
  free(p);
  tes_stats_get(&s0);
  p = calloc(3, 5);
  tes_stats_get(&s1);
  CHECK(DELTA(calloc_calls) == 1 && DELTA(malloc_calls) == 0, "one calloc: calloc +%" PRId64 " malloc +%" PRId64,
        DELTA(calloc_calls), DELTA(malloc_calls));
  free(p);
}

/* Every small malloc is either a fast-path hit or a miss, exactly once. */
static void check_fast_path_split(void) {
  API_GROUP("fast path hits + misses");
  enum { N = 1000 };
  static void *blocks[N];
  tes_stats_get(&s0);
  for (int i = 0; i < N; i++) blocks[i] = malloc(16 + (size_t)(i % 8) * 16);
  tes_stats_get(&s1);
  CHECK(DELTA(fast_path_hits) + DELTA(fast_path_misses) == N, "hits +%" PRId64 " misses +%" PRId64 " for %d small mallocs",
        DELTA(fast_path_hits), DELTA(fast_path_misses), N);
  CHECK(DELTA(malloc_calls) == N, "malloc_calls +%" PRId64 ", want %d", DELTA(malloc_calls), N);
  for (int i = 0; i < N; i++) free(blocks[i]);
  /* Same sizes again: the pages are warm, nearly all hits. */
  tes_stats_get(&s0);
  for (int i = 0; i < N; i++) blocks[i] = malloc(16 + (size_t)(i % 8) * 16);
  tes_stats_get(&s1);
  CHECK(DELTA(fast_path_hits) + DELTA(fast_path_misses) == N, "second round: hits +%" PRId64 " misses +%" PRId64,
        DELTA(fast_path_hits), DELTA(fast_path_misses));
  CHECK(DELTA(fast_path_hits) >= N * 9 / 10, "warm pages: only %" PRId64 " of %d small mallocs hit the fast path",
        DELTA(fast_path_hits), N);
  for (int i = 0; i < N; i++) free(blocks[i]);
}

static void check_call_counters(void) {
  API_GROUP("call counters");
  enum { MALLOCS = 1000, CALLOCS = 100, REALLOCS = 50, FREES = 500 };
  static void *a[MALLOCS], *c[CALLOCS];
  tes_stats_get(&s0);
  for (int i = 0; i < MALLOCS; i++) a[i] = malloc(48);
  for (int i = 0; i < CALLOCS; i++) c[i] = calloc(10, 8);
  for (int i = 0; i < REALLOCS; i++) a[i] = realloc(a[i], 200);  /* moves: 48 -> 208 class */
  for (int i = MALLOCS - FREES; i < MALLOCS; i++) free(a[i]);
  tes_stats_get(&s1);

  CHECK(DELTA(malloc_calls) == MALLOCS, "malloc_calls +%" PRId64 ", want %d", DELTA(malloc_calls), MALLOCS);
  CHECK(DELTA(calloc_calls) == CALLOCS, "calloc_calls +%" PRId64 ", want %d", DELTA(calloc_calls), CALLOCS);
  CHECK(DELTA(realloc_calls) == REALLOCS, "realloc_calls +%" PRId64 ", want %d", DELTA(realloc_calls), REALLOCS);
  CHECK(DELTA(free_calls) == FREES, "free_calls +%" PRId64 ", want %d", DELTA(free_calls), FREES);
  CHECK(DELTA(aligned_calls) == 0, "aligned_calls +%" PRId64 ", want 0", DELTA(aligned_calls));
  CHECK(DELTA(failed_calls) == 0, "failed_calls +%" PRId64 ", want 0", DELTA(failed_calls));
  CHECK(DELTA(cross_thread_frees) == 0, "cross_thread_frees +%" PRId64 " on one thread", DELTA(cross_thread_frees));
  CHECK(DELTA(fast_path_hits) + DELTA(fast_path_misses) >= MALLOCS,
        "fast path hits+misses +%" PRId64 " for %d small mallocs", DELTA(fast_path_hits) + DELTA(fast_path_misses),
        MALLOCS);
  CHECK(DELTA(fast_path_hits) > MALLOCS / 2, "fast_path_hits +%" PRId64 " for %d same-size mallocs",
        DELTA(fast_path_hits), MALLOCS);

  /* in_use: exactly the usable bytes of what is live from this window. */
  size_t u48 = tes_usable_size(a[REALLOCS]), u200 = tes_usable_size(a[0]), u80 = tes_usable_size(c[0]);
  int64_t want = (int64_t)((MALLOCS - FREES - REALLOCS) * u48 + REALLOCS * u200 + CALLOCS * u80);
  CHECK(DELTA(in_use.current) == want, "in_use +%" PRId64 ", want %" PRId64, DELTA(in_use.current), want);
  CHECK(s1.in_use.peak >= s1.in_use.current, "in_use peak %" PRId64 " < current %" PRId64, s1.in_use.peak,
        s1.in_use.current);

  /* Per-class live blocks and calls. */
  int c48 = class_of_size(&s1, u48), c208 = class_of_size(&s1, u200), c80 = class_of_size(&s1, u80);
  CHECK(c48 >= 0 && c208 >= 0 && c80 >= 0, "usable sizes %zu/%zu/%zu are not class sizes in tes_stats", u48,
        u200, u80);
  if (c48 >= 0 && c208 >= 0 && c80 >= 0) {
    CHECK(DELTA(class_live_blocks[c48]) == MALLOCS - FREES - REALLOCS, "class %d (%zu B) live +%" PRId64 ", want %d",
          c48, u48, DELTA(class_live_blocks[c48]), MALLOCS - FREES - REALLOCS);
    CHECK(DELTA(class_live_blocks[c208]) == REALLOCS, "class %d (%zu B) live +%" PRId64 ", want %d", c208, u200,
          DELTA(class_live_blocks[c208]), REALLOCS);
    CHECK(DELTA(class_live_blocks[c80]) == CALLOCS, "class %d (%zu B) live +%" PRId64 ", want %d", c80, u80,
          DELTA(class_live_blocks[c80]), CALLOCS);
    CHECK(DELTA(class_malloc_calls[c48]) == MALLOCS, "class %d malloc calls +%" PRId64 ", want %d", c48,
          DELTA(class_malloc_calls[c48]), MALLOCS);
    CHECK(DELTA(class_malloc_calls[c208]) == REALLOCS, "class %d allocations +%" PRId64 ", want %d (moved reallocs)",
          c208, DELTA(class_malloc_calls[c208]), REALLOCS);
    CHECK(DELTA(class_malloc_calls[c80]) == CALLOCS, "class %d allocations +%" PRId64 ", want %d (callocs)", c80,
          DELTA(class_malloc_calls[c80]), CALLOCS);
  }
  /* Every class size is a multiple of 16 and classes ascend. */
  bool ascending = s1.class_count > 0 && s1.class_count <= TES_STATS_MAX_CLASSES;
  for (uint32_t k = 0; ascending && k < s1.class_count; k++) {
    ascending &= s1.class_block_size[k] % 16 == 0;
    if (k > 0) ascending &= s1.class_block_size[k] > s1.class_block_size[k - 1];
  }
  CHECK(ascending, "class_block_size table (count %u) not ascending multiples of 16", s1.class_count);

  for (int i = 0; i < MALLOCS - FREES; i++) free(a[i]);
  for (int i = 0; i < CALLOCS; i++) free(c[i]);
}

static void check_aligned_failed_inplace(void) {
  API_GROUP("aligned, failed, in-place counters");
  void *p[6];
  void *small = malloc(40);
  tes_stats_get(&s0);
  p[0] = aligned_alloc(64, 100);
  posix_memalign(&p[1], 256, 100);
  p[2] = memalign(4096, 100);
  p[3] = valloc(100);
  p[4] = pvalloc(100);
  p[5] = aligned_alloc(32, 48);
  tes_stats_get(&s1);
  CHECK(DELTA(aligned_calls) == 6, "aligned_calls +%" PRId64 ", want 6", DELTA(aligned_calls));
  CHECK(DELTA(malloc_calls) == 0, "aligned calls counted as malloc_calls +%" PRId64, DELTA(malloc_calls));
  /* Failures (whether a failed call also counts under its API is left
   * open by the contract; failed_calls is not). */
  tes_stats_get(&s0);
  void *f1 = malloc(opaque_size_max);
  void *f2 = calloc(opaque_size_max, 2);
  void *f3 = aligned_alloc(64, opaque_size_max - 10);
  tes_stats_get(&s1);
  CHECK(DELTA(failed_calls) == 3, "failed_calls +%" PRId64 ", want 3", DELTA(failed_calls));
  tes_stats_get(&s0);
  for (int i = 0; i < 10; i++) small = realloc(small, 33 + i % 8);  /* stays in the 48-byte class */
  tes_stats_get(&s1);
  CHECK(DELTA(realloc_calls) == 10, "realloc_calls +%" PRId64 ", want 10", DELTA(realloc_calls));
  CHECK(DELTA(realloc_in_place) == 10, "realloc_in_place +%" PRId64 ", want 10", DELTA(realloc_in_place));
  CHECK(f1 == NULL && f2 == NULL && f3 == NULL, "absurd allocations succeeded");
  for (int i = 0; i < 6; i++) free(p[i]);
  free(small);
}

static void check_large_and_os(void) {
  API_GROUP("large blocks and OS traffic");
  const size_t big = (size_t)64 << 20;
  tes_stats_get(&s0);
  unsigned char *p = malloc(big);
  tes_stats_get(&s1);
  REQUIRE(p != NULL, "malloc(64 MiB) failed");
  CHECK(DELTA(large_in_use.current) == (int64_t)tes_usable_size(p), "large_in_use +%" PRId64 ", want %zu",
        DELTA(large_in_use.current), tes_usable_size(p));
  CHECK(DELTA(in_use.current) == (int64_t)tes_usable_size(p), "in_use +%" PRId64 " for a 64 MiB block, want %zu",
        DELTA(in_use.current), tes_usable_size(p));
  CHECK(DELTA(os_mmap_calls) >= 1 && DELTA(os_mmap_bytes) >= (int64_t)big,
        "64 MiB block: os_mmap_calls +%" PRId64 ", os_mmap_bytes +%" PRId64, DELTA(os_mmap_calls),
        DELTA(os_mmap_bytes));
  CHECK(DELTA(reserved.current) >= (int64_t)big, "reserved +%" PRId64 " for a 64 MiB block", DELTA(reserved.current));
  CHECK(DELTA(committed.current) >= (int64_t)big, "committed +%" PRId64 " for a 64 MiB block",
        DELTA(committed.current));
  memset(p, 0x21, 4096);
  p[big - 1] = 0x42;

  /* Huge realloc grows by mremap: counted, contents kept. */
  size_t usable_before = tes_usable_size(p);
  tes_stats_get(&s0);
  unsigned char *q = realloc(p, big * 4);
  tes_stats_get(&s1);
  REQUIRE(q != NULL, "realloc(64 MiB -> 256 MiB) failed");
  CHECK(q[0] == 0x21 && q[4095] == 0x21 && q[big - 1] == 0x42, "huge realloc lost contents");
  CHECK(DELTA(huge_remaps) == 1, "huge_remaps +%" PRId64 ", want 1", DELTA(huge_remaps));
  CHECK(DELTA(os_mremap_calls) >= 1, "os_mremap_calls +%" PRId64 ", want >= 1", DELTA(os_mremap_calls));
  CHECK(DELTA(large_in_use.current) == (int64_t)tes_usable_size(q) - (int64_t)usable_before,
        "large_in_use +%" PRId64 " on huge realloc, want %" PRId64, DELTA(large_in_use.current),
        (int64_t)tes_usable_size(q) - (int64_t)usable_before);

  /* Free and collect(force): the memory goes back (munmap or purge). */
  tes_stats_get(&s0);
  free(q);
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(DELTA(large_in_use.current) < -(int64_t)(big * 3), "large_in_use %+" PRId64 " after freeing 256 MiB",
        DELTA(large_in_use.current));
  CHECK(DELTA(committed.current) <= -(int64_t)(big * 3), "committed %+" PRId64 " after free + tes_collect(true)",
        DELTA(committed.current));
  CHECK(DELTA(os_munmap_bytes) + DELTA(os_purged_bytes) >= (int64_t)(big * 3),
        "os_munmap_bytes +%" PRId64 " os_purged_bytes +%" PRId64 " after returning 256 MiB", DELTA(os_munmap_bytes),
        DELTA(os_purged_bytes));
  CHECK(DELTA(os_munmap_calls) + DELTA(os_madvise_calls) >= 1, "no munmap/madvise call counted");
}

static void *cross_free_thread(void *arg) {
  void **blocks = arg;
  for (int i = 0; i < 1000; i++) free(blocks[i]);
  free(malloc(24)); /* and is a thread of the allocator's: started/exited count */
  return NULL;
}

static void check_cross_thread(void) {
  API_GROUP("cross-thread frees");
  static void *blocks[1000];
  tes_stats_get(&s0);
  for (int i = 0; i < 1000; i++) blocks[i] = malloc(64 + (size_t)(i % 4) * 16);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, cross_free_thread, blocks) == 0, "pthread_create");
  pthread_join(t, NULL);
  tes_collect(false);  /* the owner (this thread) collects the hand-off */
  tes_stats_get(&s1);
  CHECK(DELTA(cross_thread_frees) == 1000, "cross_thread_frees +%" PRId64 ", want 1000", DELTA(cross_thread_frees));
  CHECK(DELTA(free_calls) == 1001, "free_calls +%" PRId64 " (1000 remote + 1 local in an exited thread), want 1001",
        DELTA(free_calls));
  CHECK(DELTA(in_use.current) == 0, "in_use %+" PRId64 " after the other thread freed everything",
        DELTA(in_use.current));
  CHECK(DELTA(threads_started) >= 1 && DELTA(threads_exited) >= 1, "threads started +%" PRId64 " exited +%" PRId64,
        DELTA(threads_started), DELTA(threads_exited));
}

/* Blocks another thread frees into a full page wait on the owner heap's
 * delayed list until its next slow path, and the page still counts them as
 * used: statistics and tes_heap_visit must count them as freed at once, not
 * after the owner collects (they did not, before the fix that walks the
 * delayed lists). */
enum { PARKED_TOTAL = 200, PARKED_FREED = 10 };
static void *parked[PARKED_TOTAL];

static void *free_first_blocks(void *arg) {
  (void)arg;
  for (int i = 0; i < PARKED_FREED; i++) free(parked[i]);
  return NULL;
}

static size_t parked_seen;
static bool count_parked(const tes_block_info_t *block, void *arg) {
  (void)arg;
  for (int i = 0; i < PARKED_TOTAL; i++)
    if (block->address == parked[i]) parked_seen++;
  return true;
}

static void check_remote_into_full_page(void) {
  API_GROUP("remote frees into full pages, before the owner collects");
  tes_collect(false);
  tes_stats_get(&s0);
  for (int i = 0; i < PARKED_TOTAL; i++) {
    parked[i] = malloc(1000); /* 1 KiB blocks: the first pages fill up */
    REQUIRE(parked[i] != NULL, "malloc");
  }
  int c = class_of_size(&s0, tes_usable_size(parked[0]));
  REQUIRE(c >= 0, "no class of %zu bytes", tes_usable_size(parked[0]));
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, free_first_blocks, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  tes_stats_get(&s1); /* no malloc, no collect in between: the owner has not looked */
  int64_t kept = PARKED_TOTAL - PARKED_FREED;
  CHECK(DELTA(class_live_blocks[c]) == kept, "class %d live %+" PRId64 ", want %+" PRId64, c,
        DELTA(class_live_blocks[c]), kept);
  CHECK(DELTA(in_use.current) == kept * (int64_t)tes_usable_size(parked[PARKED_FREED]),
        "in_use %+" PRId64 ", want %" PRId64 " blocks of %zu", DELTA(in_use.current), kept,
        tes_usable_size(parked[PARKED_FREED]));
  tes_heap_visit(NULL, count_parked, NULL);
  CHECK(parked_seen == (size_t)kept, "tes_heap_visit saw %zu of the blocks, want %" PRId64, parked_seen, kept);
  for (int i = PARKED_FREED; i < PARKED_TOTAL; i++) free(parked[i]);
}

static void check_gauges_consistent(void) {
  API_GROUP("gauges consistent");
  void *keep = malloc(5000);
  tes_stats_get(&s1);
  CHECK(s1.fragmentation_bytes == s1.committed.current - s1.in_use.current,
        "fragmentation_bytes %" PRId64 " != committed %" PRId64 " - in_use %" PRId64, s1.fragmentation_bytes,
        s1.committed.current, s1.in_use.current);
  double want = s1.committed.current > 0 ? 100.0 * (double)s1.fragmentation_bytes / (double)s1.committed.current : 0;
  CHECK(s1.fragmentation_percent > want - 0.01 && s1.fragmentation_percent < want + 0.01,
        "fragmentation_percent %.3f, want %.3f", s1.fragmentation_percent, want);
  CHECK(s1.committed.current <= s1.reserved.current, "committed %" PRId64 " > reserved %" PRId64,
        s1.committed.current, s1.reserved.current);
  CHECK(s1.in_use.current <= s1.committed.current, "in_use %" PRId64 " > committed %" PRId64, s1.in_use.current,
        s1.committed.current);
  CHECK(s1.committed.peak >= s1.committed.current && s1.reserved.peak >= s1.reserved.current,
        "a peak is below its current value");
  CHECK(s1.in_use.peak >= (int64_t)256 << 20, "in_use peak %" PRId64 " forgot the 256 MiB block", s1.in_use.peak);
  free(keep);

  /* tes_stats_reset zeroes call counters, keeps the gauges. */
  tes_stats_get(&s0);
  tes_stats_reset();
  tes_stats_get(&s1);
  CHECK(s1.malloc_calls == 0 && s1.free_calls == 0 && s1.calloc_calls == 0 && s1.realloc_calls == 0,
        "after reset: malloc %" PRIu64 " free %" PRIu64 " calloc %" PRIu64 " realloc %" PRIu64, s1.malloc_calls,
        s1.free_calls, s1.calloc_calls, s1.realloc_calls);
  CHECK(s1.in_use.current == s0.in_use.current, "reset changed in_use %" PRId64 " -> %" PRId64, s0.in_use.current,
        s1.in_use.current);
  void *p = malloc(10);
  tes_stats_get(&s1);
  CHECK(s1.malloc_calls == 1, "one malloc after reset: malloc_calls %" PRIu64, s1.malloc_calls);
  free(p);
}

static void check_glibc_views(void) {
  API_GROUP("mallinfo2 / malloc_trim / malloc_stats / malloc_info");
  void *p = malloc(1000);
  /* Large blocks are glibc's mmapped chunks: in hblkhd, and not in arena or
   * uordblks, so that uordblks + hblkhd is the total in use and arena +
   * hblkhd the total held, as under glibc (before, uordblks and arena
   * included them as well, and uordblks + hblkhd counted them twice). */
  void *large = malloc(8 << 20);
  memset(large, 1, 8 << 20);
  struct mallinfo2 mi = mallinfo2();
  tes_stats_get(&s1);
  CHECK(mi.hblkhd == (size_t)s1.large_in_use.current && mi.hblkhd >= (8 << 20),
        "mallinfo2.hblkhd %zu != large_in_use %" PRId64 " (an 8 MiB block is live)", mi.hblkhd,
        s1.large_in_use.current);
  CHECK(mi.uordblks + mi.hblkhd == (size_t)s1.in_use.current, "mallinfo2.uordblks %zu + hblkhd %zu != in_use %" PRId64,
        mi.uordblks, mi.hblkhd, s1.in_use.current);
  CHECK(mi.arena + mi.hblkhd == (size_t)s1.committed.current, "mallinfo2.arena %zu + hblkhd %zu != committed %" PRId64,
        mi.arena, mi.hblkhd, s1.committed.current);
  CHECK(mi.uordblks + mi.fordblks == mi.arena, "mallinfo2: uordblks %zu + fordblks %zu != arena %zu", mi.uordblks,
        mi.fordblks, mi.arena);
  CHECK(mi.fordblks == (size_t)s1.fragmentation_bytes, "mallinfo2.fordblks %zu != fragmentation %" PRId64,
        mi.fordblks, s1.fragmentation_bytes);
  /* hblks counts them (it was 0 beside a non-zero hblkhd). */
  CHECK(mi.hblks >= 1, "mallinfo2.hblks %zu with an 8 MiB block live", mi.hblks);
  free(large);
  struct mallinfo2 after_large = mallinfo2();
  CHECK(after_large.hblks + 1 == mi.hblks, "mallinfo2.hblks %zu after freeing one of %zu large blocks",
        after_large.hblks, mi.hblks);
  void *q = malloc(3000);
  struct mallinfo2 mi2 = mallinfo2();
  CHECK(mi2.uordblks - mi.uordblks == tes_usable_size(q), "mallinfo2.uordblks +%zu after malloc(3000), want %zu",
        mi2.uordblks - mi.uordblks, tes_usable_size(q));
  free(q);
  free(p);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct mallinfo old = mallinfo();
#pragma GCC diagnostic pop
  CHECK(old.uordblks > 0 && old.arena >= old.uordblks, "mallinfo: uordblks %d arena %d", old.uordblks, old.arena);

  /* malloc_trim: 64 MiB of small blocks freed -> returns 1 and releases.
   * A long purge delay keeps the lazy purge from returning pages during
   * the frees, so everything is still there for malloc_trim to release. */
  long saved_delay = tes_option_get(TES_OPTION_PURGE_DELAY_MS);
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 100000);
  tes_collect(true);
  tes_stats_get(&s0);
  int64_t committed_start = s0.committed.current;
  enum { N = (64 << 20) / 64 };
  void **blocks = malloc(N * sizeof *blocks);
  for (int i = 0; i < N; i++) {
    blocks[i] = malloc(64);
    memset(blocks[i], 1, 64);
  }
  for (int i = 0; i < N; i++) free(blocks[i]);
  free(blocks);
  tes_stats_get(&s0);
  int released = malloc_trim(0);
  tes_stats_get(&s1);
  CHECK(released == 1, "malloc_trim(0) after freeing 64 MiB returned %d, want 1", released);
  CHECK(s1.committed.current <= committed_start + 4 * MIB,
        "after malloc_trim committed is %.1f MiB above its value before the 64 MiB",
        (double)(s1.committed.current - committed_start) / MIB);
  int again = malloc_trim(0);
  CHECK(again == 0, "second malloc_trim(0) with nothing to release returned %d", again);
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, saved_delay);

  /* malloc_stats prints glibc's lines to stderr. */
  FILE *capture = tmpfile();
  REQUIRE(capture != NULL, "tmpfile");
  fflush(stderr);
  int saved = dup(2);
  dup2(fileno(capture), 2);
  malloc_stats();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char text[4096] = {0};
  rewind(capture);
  size_t got = fread(text, 1, sizeof text - 1, capture);
  fclose(capture);
  CHECK(got > 0 && strstr(text, "system bytes") && strstr(text, "in use bytes"),
        "malloc_stats output lacks glibc's lines: \"%s\"", text);

  /* malloc_info: XML on the given stream; options != 0 returns EINVAL and
   * leaves errno alone, as glibc 2.36 does. */
  capture = tmpfile();
  int rc = malloc_info(0, capture);
  rewind(capture);
  memset(text, 0, sizeof text);
  got = fread(text, 1, sizeof text - 1, capture);
  CHECK(rc == 0, "malloc_info(0) returned %d", rc);
  CHECK(strncmp(text, "<malloc version=", 16) == 0 && strstr(text, "</malloc>"),
        "malloc_info output is not glibc-style XML: \"%.200s\"", text);
  errno = 0;
  rc = malloc_info(1, capture);
  CHECK(rc == EINVAL && errno == 0, "malloc_info(1) = %d errno %d, want EINVAL and errno 0", rc, errno);
  fclose(capture);
}

static void check_stats_print(void) {
  API_GROUP("tes_stats_print");
  FILE *capture = tmpfile();
  REQUIRE(capture != NULL, "tmpfile");
  tes_stats_print(capture);
  long size = ftell(capture);
  fclose(capture);
  CHECK(size > 200, "tes_stats_print wrote only %ld bytes", size);
}

/* Threads that exit with blocks the main thread frees afterwards: their
 * heaps are parked (TESSERA_HEAP_PARK, default 1), and malloc_trim abandons
 * them, freeing the segments those frees emptied. Every segment counted in
 * heaps_abandoned (at the park) must then count in heaps_reclaimed (at the
 * adoption, or as freed there): before, the freed ones never did (54
 * abandoned, 44 reclaimed after four generations). */
enum { EXIT_BLOCKS = 20000 };
static void *exit_blocks[2][EXIT_BLOCKS];
static void *alloc_and_exit(void *arg) {
  void **b = arg;
  for (int i = 0; i < EXIT_BLOCKS; i++) b[i] = malloc(16 + (size_t)(i % 50) * 16);
  for (int i = 0; i < EXIT_BLOCKS; i += 2) {
    free(b[i]);
    b[i] = NULL;
  }
  return NULL;
}
static void check_exited_segments_balance(void) {
  API_GROUP("exited threads' segments: abandoned, then reclaimed");
  for (int g = 0; g < 4; g++) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&t[i], NULL, alloc_and_exit, exit_blocks[i]) == 0, "thread");
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    /* Their blocks, freed here: remote frees into the parked heaps' pages. */
    for (size_t i = 0; i < 2 * EXIT_BLOCKS; i++) free(exit_blocks[i % 2][i / 2]);
  }
  malloc_trim(0); /* abandons the parked heaps, adopts every abandoned segment */
  tes_stats_get(&s1);
  CHECK(s1.heaps_abandoned == s1.heaps_reclaimed, "after malloc_trim: %" PRIu64 " segments abandoned, %" PRIu64
        " reclaimed", s1.heaps_abandoned, s1.heaps_reclaimed);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  REQUIRE(api_malloc_is_linked_tessera(), "api_stats must be linked with libtessera");
  api_warm_up_threads();
  setvbuf(stdout, NULL, _IONBF, 0);
  /* Warm up: the first calls may set up the thread's heap. */
  free(malloc(48));
  check_single_calls();
  check_fast_path_split();
  check_call_counters();
  check_aligned_failed_inplace();
  check_large_and_os();
  check_cross_thread();
  check_remote_into_full_page();
  check_gauges_consistent();
  check_glibc_views();
  check_exited_segments_balance();
  check_stats_print();
  return api_finish("api_stats");
}
