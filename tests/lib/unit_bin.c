/* unit_bin.c — the per-class bins of recently freed blocks (heap.c,
 * alloc_inline.h): an owner's free goes to its heap's bin while the bin has
 * room and the next malloc of the class takes it back last-in first-out; the
 * block stays counted in its page; a full bin sends frees to the page;
 * collect, heap delete/destroy and thread exit empty the bins; statistics
 * and the live-block walk see binned blocks as freed; a page that leaves
 * use closes its bin pointer; blocks of a first-class heap go to that heap's
 * bin. */
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

static tes_bin_t *bin_of(tes_heap_t *heap, size_t size) { return &heap->bins[tes_class_of(size)]; }

static tes_page_t *page_of(void *p) { return tes_page_of(tes_segment_of(p), p); }

typedef struct {
  const void *skip[8];
  size_t skips, seen, class_blocks;
  unsigned class_index;
} walk_t;

static bool count_blocks(const tes_block_info_t *info, void *arg) {
  walk_t *w = arg;
  for (size_t i = 0; i < w->skips; i++)
    if (info->address == w->skip[i]) w->seen++;
  if (info->size_class == w->class_index) w->class_blocks++;
  return true;
}

/* Frees the 64 blocks of the array it is given (remote frees). */
static void *thread_frees(void *arg) {
  void **v = arg;
  for (int i = 0; i < 64; i++) tes_free(v[i]);
  return NULL;
}

static void *thread_fills_its_bin(void *arg) {
  (void)arg;
  void *p[10];
  for (int i = 0; i < 10; i++) p[i] = tes_malloc(200);
  for (int i = 0; i < 10; i++) tes_free(p[i]);
  return (void *)(uintptr_t)tes_bin_held(bin_of(tes_tls_heap, 200));
}

/* Grows its 1 KiB bin past 64 (the rounds of the growth check in main),
 * then frees 100 blocks into it and exits: the park (heap.c, bin_park)
 * must give back the blocks past what it keeps. */
static void *thread_grows_its_bin(void *arg) {
  (void)arg;
  enum { N = 100 };
  void *kb[N];
  for (int i = 0; i < N; i++) kb[i] = tes_malloc(1000);
  tes_bin_t *kbin = bin_of(tes_tls_heap, 1000); /* the thread's heap exists from its first malloc on */
  for (int round = 0; round < 20 && (round < 4 || kbin->limit != 128); round++) {
    for (int i = 0; i < N; i++) tes_free(kb[i]);
    for (int i = 0; i < N; i++) kb[i] = tes_malloc(1000);
  }
  for (int i = 0; i < N; i++) tes_free(kb[i]);
  return (void *)(uintptr_t)tes_bin_held(kbin);
}

int main(void) {
  tes_collect(true);
  void *warm = tes_malloc(100);
  tes_free(warm);
  tes_heap_t *heap = tes_tls_heap;
  REQUIRE(!heap->is_static, "no thread heap after the first malloc");
  tes_bin_t *bin = bin_of(heap, 100);

  /* Limits: 256 KiB worth of blocks, between 2 and 64; 128 KiB worth and at
   * most 32 for the classes of 1-8 KiB, eight a doubling (8 KiB: 16). */
  CHECK(heap->bins[0].limit == 64, "16-byte bin limit %u", heap->bins[0].limit);
  CHECK(bin_of(heap, 1024)->limit == 64, "1 KiB bin limit %u", bin_of(heap, 1024)->limit);
  CHECK(bin_of(heap, 1032)->limit == 32, "1,032 B bin limit %u", bin_of(heap, 1032)->limit);
  CHECK(bin_of(heap, 8192)->limit == 16, "8 KiB bin limit %u", bin_of(heap, 8192)->limit);
  CHECK(bin_of(heap, 8193)->limit == 25, "8,193 B bin limit %u", bin_of(heap, 8193)->limit);
  CHECK(bin_of(heap, 40000)->limit == 6, "40 KiB bin limit %u", bin_of(heap, 40000)->limit);
  CHECK(heap->bins[TES_CLASS_COUNT - 1].limit == 2, "128 KiB bin limit %u", heap->bins[TES_CLASS_COUNT - 1].limit);
  /* All bins full at once hold no more than with four classes a doubling
   * (6.43 MiB; 8.54 MiB had the eighths the budget of a quarter class), and
   * the bins of each doubling from 1 to 8 KiB no more than its four classes'
   * did (1,032 bytes a class to 4,104: the aligned row's RSS, PERFORMANCE.md). */
  size_t all = 0, doubling[17] = {0};
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    size_t bytes = (size_t)heap->bins[c].limit * tes_class_size(c);
    all += bytes;
    doubling[63 - __builtin_clzl(tes_class_size(c) - 1)] += bytes;
  }
  CHECK(all <= (size_t)13 << 19, "all bins full: %zu bytes (> 6.5 MiB)", all);
  CHECK(doubling[10] <= 64 * (1280 + 1536 + 1792 + 2048), "1-2 KiB bins: %zu bytes", doubling[10]);
  CHECK(doubling[11] <= 64 * (2560 + 3072 + 3584 + 4096), "2-4 KiB bins: %zu bytes", doubling[11]);
  CHECK(doubling[12] <= (size_t)4 * (256 << 10), "4-8 KiB bins: %zu bytes", doubling[12]);

  /* Last in, first out; the page keeps counting the binned block as used. */
  tes_collect(false);
  CHECK(tes_bin_held(bin) == 0 && bin->head == TES_BIN_END, "collect left %u blocks in the bin", tes_bin_held(bin));
  void *a = tes_malloc(100), *b = tes_malloc(100), *c = tes_malloc(100);
  tes_page_t *page = page_of(a);
  uint32_t used = page->used;
  tes_free(a);
  tes_free(b);
  tes_free(c);
  CHECK(tes_bin_held(bin) == 3 && bin->head == c, "bin holds %u, head %p (want 3, %p)", tes_bin_held(bin),
        (void *)bin->head, c);
  CHECK(page->used == used, "a binned free changed the page's used count %u -> %u", used, page->used);
  void *c2 = tes_malloc(100), *b2 = tes_malloc(100), *a2 = tes_malloc(100);
  CHECK(c2 == c && b2 == b && a2 == a, "not LIFO: %p %p %p for %p %p %p", c2, b2, a2, c, b, a);
  CHECK(tes_bin_held(bin) == 0, "bin not empty after three pops: %u", tes_bin_held(bin));
  /* Any size of the class hits the same bin (direct table: 97..112 bytes). */
  tes_free(a2);
  CHECK(tes_malloc(97) == a2, "a 97-byte request missed the 112-byte class's bin");
  tes_free(a2);
  tes_free(b2);
  tes_free(c2);

  /* A full bin sends the rest to the pages. */
  tes_collect(false);
  enum { N = 100 };
  void *blocks[N];
  for (int i = 0; i < N; i++) blocks[i] = tes_malloc(100);
  for (int i = 0; i < N; i++) tes_free(blocks[i]);
  CHECK(tes_bin_held(bin) == bin->limit, "full bin holds %u of %u", tes_bin_held(bin), bin->limit);
  size_t on_pages = 0;
  for (int i = 0; i < N; i++) {
    tes_page_t *pg = page_of(blocks[i]);
    for (tes_block_t *f = pg->local_free; f != NULL; f = f->next)
      if (f == blocks[i]) on_pages++;
  }
  CHECK(on_pages == N - bin->limit, "%zu frees reached the pages, want %u", on_pages, N - bin->limit);

  /* Collect empties the bins into the pages; empty pages then retire (a
   * live block of another class keeps the segment, so `page` stays mapped). */
  void *keeper = tes_malloc(40);
  REQUIRE(tes_segment_of(keeper) == tes_segment_of(page), "the 40-byte block went to another segment");
  tes_collect(false);
  CHECK(tes_bin_held(bin) == 0, "collect left %u blocks", tes_bin_held(bin));
  CHECK(!page->in_use, "the emptied page is still in use after collect");
  CHECK(page->bin == &tes_bin_closed, "a retired page still points at a bin");

  /* Statistics count binned traffic as calls and binned blocks as free. */
  tes_stats_t s0, s1;
  void *hold = tes_malloc(100); /* keeps a page of the class in use */
  tes_stats_get(&s0);
  for (int i = 0; i < 1000; i++) tes_free(tes_malloc(100));
  for (int i = 0; i < 10; i++) blocks[i] = tes_malloc(100);
  for (int i = 0; i < 10; i++) tes_free(blocks[i]);
  tes_stats_get(&s1);
  unsigned cls = tes_class_of(100);
  CHECK(s1.malloc_calls - s0.malloc_calls == 1010, "malloc_calls +%llu, want 1010",
        (unsigned long long)(s1.malloc_calls - s0.malloc_calls));
  CHECK(s1.free_calls - s0.free_calls == 1010, "free_calls +%llu, want 1010",
        (unsigned long long)(s1.free_calls - s0.free_calls));
  CHECK(s1.class_malloc_calls[cls] - s0.class_malloc_calls[cls] == 1010, "class calls +%llu",
        (unsigned long long)(s1.class_malloc_calls[cls] - s0.class_malloc_calls[cls]));
  CHECK(s1.class_live_blocks[cls] == s0.class_live_blocks[cls], "live blocks %lld -> %lld",
        (long long)s0.class_live_blocks[cls], (long long)s1.class_live_blocks[cls]);
  CHECK(s1.in_use.current == s0.in_use.current, "in use %lld -> %lld", (long long)s0.in_use.current,
        (long long)s1.in_use.current);
  tes_free(hold);
  tes_free(keeper);

  /* A bin whose mallocs empty it while frees past it wait on their pages
   * grows (heap.c, bin_grow): rounds of 100 blocks of 1 KiB freed, then
   * allocated again, get every block back from the bin, the block freed
   * last first (with the bin of 64 the first malloc got the 64th block
   * freed, and the last 36 frees, the ones in cache, waited on the pages:
   * fit_cpe357). The next flush sets the limit back; a timed one (once per
   * purge delay, on a slow path) may undo a round's growth, so the rounds
   * go on until one leaves the limit grown (one or two). */
  tes_collect(false);
  tes_bin_t *kbin = bin_of(heap, 1000);
  CHECK(kbin->limit == 64, "1 KiB bin limit %u before the rounds", kbin->limit);
  void *kb[N];
  for (int i = 0; i < N; i++) kb[i] = tes_malloc(1000);
  for (int round = 0; round < 20 && (round < 4 || kbin->limit != 128); round++) {
    for (int i = 0; i < N; i++) tes_free(kb[i]);
    for (int i = 0; i < N; i++) kb[i] = tes_malloc(1000);
  }
  for (int i = 0; i < N; i++) tes_free(kb[i]);
  CHECK(kbin->limit == 128 && tes_bin_held(kbin) == N, "1 KiB bin after the rounds: limit %u, holds %u (want 128, %d)",
        kbin->limit, tes_bin_held(kbin), N);
  void *back = tes_malloc(1000);
  CHECK(back == kb[N - 1], "the first malloc got %p, not the block freed last %p", back, kb[N - 1]);
  tes_free(back);
  tes_collect(false);
  CHECK(kbin->limit == 64 && tes_bin_held(kbin) == 0, "after collect: limit %u, holds %u (want 64, 0)", kbin->limit,
        tes_bin_held(kbin));

  /* A small class grows past 255 blocks (the room was a byte until the
   * twenty-second session): rounds of 1,000 blocks of 64 B freed, then
   * allocated again (bench_batch's shape) end with every block of the
   * round in the bin, the block freed last coming back first; with 255 at
   * most, the bin kept the round's first 255 frees and the pages the rest. */
  tes_collect(false);
  tes_bin_t *sbin = bin_of(heap, 64);
  enum { SMALL_ROUND = 1000 };
  static void *sb[SMALL_ROUND];
  for (int i = 0; i < SMALL_ROUND; i++) sb[i] = tes_malloc(64);
  for (int round = 0; round < 30 && (round < 6 || sbin->limit < SMALL_ROUND); round++) {
    for (int i = 0; i < SMALL_ROUND; i++) tes_free(sb[i]);
    for (int i = 0; i < SMALL_ROUND; i++) sb[i] = tes_malloc(64);
  }
  for (int i = 0; i < SMALL_ROUND; i++) tes_free(sb[i]);
  CHECK(sbin->limit >= SMALL_ROUND && tes_bin_held(sbin) == SMALL_ROUND,
        "64 B bin after the rounds: limit %u, holds %u (want >= %d, %d)", sbin->limit, tes_bin_held(sbin), SMALL_ROUND,
        SMALL_ROUND);
  void *sback = tes_malloc(64);
  CHECK(sback == sb[SMALL_ROUND - 1], "the first malloc got %p, not the block freed last %p", sback,
        sb[SMALL_ROUND - 1]);
  tes_free(sback);

  /* A loop whose blocks all fit its bin takes no malloc slow path, where
   * the bins' flush, the queue sweep and the purges wait (once per purge
   * delay): the bin's room still runs out by itself, about one block of it
   * in 256 pops (internal.h, TES_BIN_POP), and the free that finds it at
   * zero runs that work when it is due (heap.c, tes_bin_room_out). Here it
   * is due at once: 100,000 pairs of one block of 64 B beside the grown
   * bin's round run it, with no slow path (a bin not grown, as before, runs
   * nothing: a loop of 64 blocks or fewer fit it before too). Until the
   * twenty-second session a pop gave its room back exactly and the flush
   * never came (bins_due stayed 0). */
  void *pp = tes_malloc(64);
  tes_free(pp);
  uint64_t slow0 = heap->counters.slow_allocs;
  heap->bins_due = 0;
  for (int i = 0; i < 100000; i++) {
    pp = tes_malloc(64);
    tes_free(pp);
  }
  CHECK(heap->counters.slow_allocs == slow0, "the pairs took %llu slow paths (want 0)",
        (unsigned long long)(heap->counters.slow_allocs - slow0));
  CHECK(heap->bins_due > 0, "the bins' flush, due, did not run in 100,000 pairs that fit the bin");
  CHECK(bin_of(heap, 64)->head == (tes_block_t *)pp, "after the pairs: the bin's head is not the block freed last");
  tes_collect(false);

  /* Growth is bounded: 1 MiB worth a class (and TES_BIN_GROWN_BLOCKS), 8 MiB added
   * to the heap's bins in all until the next flush. Rounds of every medium
   * class (10-128 KiB), 1 MiB of blocks each freed then allocated again,
   * would grow them by 12 MiB; a long purge delay keeps the timed flush
   * away. */
  long delay0 = tes_option_get(TES_OPTION_PURGE_DELAY_MS);
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 600000) == 0, "purge delay");
  tes_collect(false);
  for (unsigned c = TES_MEDIUM_CLASS_FIRST; c < TES_CLASS_COUNT; c++) {
    size_t size = tes_class_size(c), n = ((size_t)1 << 20) / size;
    void **v = tes_malloc(n * sizeof *v);
    REQUIRE(v != NULL, "malloc");
    for (size_t i = 0; i < n; i++) v[i] = tes_malloc(size);
    for (int round = 0; round < 6; round++) {
      for (size_t i = 0; i < n; i++) tes_free(v[i]);
      for (size_t i = 0; i < n; i++) v[i] = tes_malloc(size);
    }
    for (size_t i = 0; i < n; i++) tes_free(v[i]);
    tes_free(v);
  }
  size_t grown_all = 0, big = 0;
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    grown_all += (size_t)heap->bins[c].limit * tes_class_size(c);
    CHECK(heap->bins[c].limit <= TES_BIN_GROWN_BLOCKS &&
              (size_t)heap->bins[c].limit * tes_class_size(c) <= ((size_t)1 << 20),
          "class %u: bin limit %u", c, heap->bins[c].limit);
    if (c >= TES_MEDIUM_CLASS_FIRST && (size_t)heap->bins[c].limit * tes_class_size(c) > ((size_t)512 << 10)) big++;
  }
  CHECK(grown_all > all && grown_all - all <= ((size_t)8 << 20) && heap->bins_grown == grown_all - all,
        "bins grew by %zu bytes (counted %zu), want at most 8 MiB", grown_all - all, heap->bins_grown);
  CHECK(big >= 6, "only %zu medium bins grew past 512 KiB worth", big);
  tes_collect(false);
  CHECK(heap->bins_grown == 0 && bin_of(heap, 120000)->limit == 2, "after collect: grown %zu, 128 KiB bin limit %u",
        heap->bins_grown, bin_of(heap, 120000)->limit);
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, delay0) == 0, "purge delay back");
  heap->bins_due = 0; /* a timed flush above set the next one 600 s away: due now */

  /* Medium classes have bins too (limit 2 for 128 KiB blocks). */
  void *m = tes_malloc(20000);
  tes_free(m);
  CHECK(tes_malloc(20000) == m, "a medium block did not come back from its bin");
  void *big1 = tes_malloc(120000), *big2 = tes_malloc(120000), *big3 = tes_malloc(120000);
  tes_free(big1);
  tes_free(big2);
  tes_free(big3); /* the bin already holds two: big3 goes to its page */
  CHECK(bin_of(heap, 120000)->head == big2 && tes_bin_held(bin_of(heap, 120000)) == 2, "128 KiB bin");
  tes_free(m);
  tes_collect(false);

  /* A slow path empties the bins once per purge delay, so a class the
   * program stopped using does not keep its page: here a 40 KiB block, alone
   * in its 512 KiB page, goes back to the page, which is then empty (as the
   * head of its class it retires at the next collect, as before bins). */
  long delay = tes_option_get(TES_OPTION_PURGE_DELAY_MS);
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 5) == 0, "purge delay");
  void *lone = tes_malloc(40000);
  tes_page_t *lone_page = page_of(lone);
  void *other = tes_malloc(30000); /* another medium class: its page keeps the segment */
  tes_free(lone);
  CHECK(tes_bin_held(bin_of(heap, 40000)) == 1 && lone_page->in_use, "the 40 KiB block is not in its bin");
  /* Past the due time the last flush set (with the delay then in force). */
  struct timespec nap = {0, (delay + 20) * 1000 * 1000};
  nanosleep(&nap, NULL);
  void *slow[64];
  size_t n_slow = 0;
  while (tes_bin_held(bin_of(heap, 40000)) != 0 && n_slow < 64) slow[n_slow++] = tes_malloc(3000); /* slow paths */
  CHECK(tes_bin_held(bin_of(heap, 40000)) == 0, "bins not emptied by %zu slow-path allocations after the delay",
        n_slow);
  CHECK(tes_page_live(lone_page) == 0, "the 512 KiB page still has %u live blocks", tes_page_live(lone_page));
  for (size_t i = 0; i < n_slow; i++) tes_free(slow[i]);
  tes_free(other);
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, delay) == 0, "purge delay back");
  tes_collect(false);

  /* TESSERA_BINS=0 (here tes_option_set) closes the bins at their next
   * flush: frees go to the pages, mallocs to the page lists; 1 reopens them. */
  REQUIRE(tes_option_set(TES_OPTION_BINS, 0) == 0, "bins option");
  tes_collect(false);
  CHECK(bin_of(heap, 100)->limit == 0, "bins still open after TESSERA_BINS=0 and a collect");
  void *off = tes_malloc(100);
  tes_page_t *off_page = page_of(off);
  uint32_t off_used = off_page->used;
  tes_free(off);
  CHECK(tes_bin_held(bin_of(heap, 100)) == 0 && off_page->used == off_used - 1,
        "with bins off a free did not go to its page (held %u, used %u -> %u)", tes_bin_held(bin_of(heap, 100)),
        off_used, off_page->used);
  REQUIRE(tes_option_set(TES_OPTION_BINS, 1) == 0, "bins option");
  tes_collect(false);
  CHECK(bin_of(heap, 100)->limit == 64, "bins not reopened: limit %u", bin_of(heap, 100)->limit);

  /* A first-class heap's blocks go to its own bins, and the walk skips them. */
  tes_heap_t *fc = tes_heap_new();
  REQUIRE(fc != NULL, "tes_heap_new");
  void *x[5];
  for (int i = 0; i < 5; i++) x[i] = tes_heap_malloc(fc, 300);
  uint32_t default_held = tes_bin_held(bin_of(heap, 300));
  tes_free(x[3]);
  tes_free(x[4]);
  CHECK(tes_bin_held(bin_of(fc, 300)) == 2, "first-class heap's bin holds %u", tes_bin_held(bin_of(fc, 300)));
  CHECK(tes_bin_held(bin_of(heap, 300)) == default_held, "the default heap's bin took a first-class block");
  walk_t w = {.skip = {x[3], x[4]}, .skips = 2, .class_index = tes_class_of(300)};
  tes_heap_visit(fc, count_blocks, &w);
  CHECK(w.seen == 0 && w.class_blocks == 3, "walk saw %zu binned blocks and %zu live, want 0 and 3", w.seen,
        w.class_blocks);
  void *from_default = tes_malloc(300);
  CHECK(from_default != x[4] && from_default != x[3], "the default heap handed out a first-class heap's block");
  tes_free(from_default);
  CHECK(tes_heap_malloc(fc, 300) == x[4], "the first-class heap did not reuse its binned block");
  /* Delete moves the pages to the default heap after emptying the bins. */
  tes_heap_delete(fc);
  memset(&w, 0, sizeof w);
  w.skip[0] = x[3];
  w.skips = 1;
  w.class_index = tes_class_of(300);
  tes_heap_visit(NULL, count_blocks, &w);
  CHECK(w.seen == 0, "a block freed into a deleted heap's bin is listed as live");
  for (int i = 0; i < 3; i++) tes_free(x[i]);
  tes_free(x[4]);

  /* Destroy drops binned blocks with the rest, counting them as freed. */
  tes_heap_t *fd = tes_heap_new();
  REQUIRE(fd != NULL, "tes_heap_new");
  tes_stats_get(&s0);
  for (int i = 0; i < 4; i++) x[i] = tes_heap_malloc(fd, 64);
  tes_free(x[0]);
  tes_free(x[1]);
  tes_bin_t *fd_bin = bin_of(fd, 64);
  CHECK(*tes_bin_mark((tes_block_t *)x[1]) == (uintptr_t)fd_bin, "a binned block does not carry its bin's mark");
  tes_heap_destroy(fd);
  tes_stats_get(&s1);
  CHECK(s1.malloc_calls - s0.malloc_calls == 4 && s1.free_calls - s0.free_calls == 2,
        "destroy with binned blocks: +%llu mallocs, +%llu frees (want 4, 2)",
        (unsigned long long)(s1.malloc_calls - s0.malloc_calls), (unsigned long long)(s1.free_calls - s0.free_calls));
  /* ... and clears their marks: the heap struct and the segment come back
   * together (tes_heap_new, then the same page carved again), so a stale
   * mark in a block handed out afresh, which the program need not
   * overwrite, made another thread's free of it a "double free". */
  tes_heap_t *fe = tes_heap_new();
  REQUIRE(fe != NULL, "tes_heap_new");
  int remarked = 0, again = 0;
  void *y[64];
  for (int i = 0; i < 64; i++) {
    y[i] = tes_heap_malloc(fe, 64);
    if (y[i] == x[0] || y[i] == x[1]) {
      again++;
      if (*tes_bin_mark((tes_block_t *)y[i]) == (uintptr_t)bin_of(fe, 64)) remarked++;
    }
  }
  CHECK(remarked == 0, "%d of %d blocks dropped from a destroyed heap's bin handed out with its mark", remarked, again);
  pthread_t tf;
  REQUIRE(pthread_create(&tf, NULL, thread_frees, y) == 0, "pthread_create");
  pthread_join(tf, NULL);
  tes_heap_destroy(fe);

  /* A thread's bins are emptied when it exits: its blocks are not live. */
  tes_stats_get(&s0);
  pthread_t t;
  void *held = NULL;
  REQUIRE(pthread_create(&t, NULL, thread_fills_its_bin, NULL) == 0, "pthread_create");
  pthread_join(t, &held);
  tes_stats_get(&s1);
  unsigned c200 = tes_class_of(200);
  CHECK((uintptr_t)held == 10, "the thread's bin held %lu blocks before exit, want 10", (unsigned long)(uintptr_t)held);
  CHECK(s1.class_live_blocks[c200] == s0.class_live_blocks[c200], "after thread exit live %lld -> %lld",
        (long long)s0.class_live_blocks[c200], (long long)s1.class_live_blocks[c200]);
  CHECK(s1.free_calls - s0.free_calls == 10, "thread's frees counted %llu, want 10",
        (unsigned long long)(s1.free_calls - s0.free_calls));

  /* The same with a grown bin holding 100: before the fix, the park kept
   * 64 and dropped the other 36 off every list (live forever, their pages
   * never empty). */
  unsigned c1000 = tes_class_of(1000);
  tes_stats_get(&s0);
  REQUIRE(pthread_create(&t, NULL, thread_grows_its_bin, NULL) == 0, "pthread_create");
  pthread_join(t, &held);
  tes_stats_get(&s1);
  CHECK((uintptr_t)held == 100, "the thread's grown bin held %lu blocks before exit, want 100",
        (unsigned long)(uintptr_t)held);
  CHECK(s1.class_live_blocks[c1000] == s0.class_live_blocks[c1000], "after the exit of a grown bin's thread live %lld -> %lld",
        (long long)s0.class_live_blocks[c1000], (long long)s1.class_live_blocks[c1000]);
  return unit_finish("unit_bin");
}
