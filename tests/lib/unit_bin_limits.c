/* unit_bin_limits.c — every bin's limits come from heap.c's compile-time
 * table (bin_limits_table, twenty-fifth session: worked out at each
 * flush before, 2,660 of a flush's 7,300 instructions). Each class's limit
 * and grown ceiling (most) must equal the formula the table replaced,
 * written out here again: 256 KiB worth of blocks (limit) or 1 MiB worth
 * (most), halved for the eighths (classes of 1-8 KiB), at least 2, at most
 * 64 or TES_BIN_GROWN_BLOCKS (halved likewise); 0 and 0 with TESSERA_BINS
 * off. Checked where limits are set: a new heap (bins_reset), a flush after
 * bins grew and held blocks (bins_flush, which now skips the bins untouched
 * since the last one: the touched ones must still be folded, given back
 * and set), the option turned off and on, and a heap parked by an exiting
 * thread and taken over by the next (bins_park). Until the twenty-fifth
 * session the park set the limits and not the ceilings: a heap parked with
 * the bins off, then taken over and parked with them on, went to its next
 * owner with every ceiling 0, and no bin of it could grow until its next
 * flush (this test's threads c and d). The hardened build's bins:
 * tests/security/whitebox.c, sbin_limits. */
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>

/* The formula, as heap.c's bin_blocks computed it at every flush until the
 * twenty-fifth session. */
static uint32_t formula(unsigned c, size_t most, size_t kib) {
  const size_t share = tes_class_steps(c) / 4;
  size_t n = (kib << 10) / share / tes_class_size(c);
  most /= share;
  return n < 2 ? 2 : n > most ? (uint32_t)most : (uint32_t)n;
}

/* Every class's limits as the formula has them (bins on) or 0 (off); with
 * `empty`, every bin empty with its whole limit as room. Returns the
 * failures. */
static int check_limits(const char *where, tes_heap_t *heap, bool on, bool empty) {
  int bad = 0;
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    const tes_bin_t *bin = &heap->bins[c];
    uint32_t limit = on ? formula(c, 64, 256) : 0, most = on ? formula(c, TES_BIN_GROWN_BLOCKS, 1024) : 0;
    if (bin->limit != limit || bin->most != most) {
      if (bad++ < 3) /* the first few of a table gone wrong */
        fprintf(stderr, "%s: class %u (%zu B): limit %u most %u, want %u %u\n", where, c, tes_class_size(c), bin->limit,
                bin->most, limit, most);
    } else if (empty && (bin->head != TES_BIN_END || bin->tally != TES_BIN_TALLY(limit))) {
      if (bad++ < 3)
        fprintf(stderr, "%s: class %u: not empty (held %u, room %u of %u)\n", where, c, tes_bin_held(bin),
                tes_bin_room(bin), limit);
    }
  }
  return bad;
}

/* What a thread checks of the heap it gets, and where that heap goes at
 * its exit (parked, for the next thread). */
typedef struct {
  bool on;           /* TESSERA_BINS as the heap's limits should say */
  bool grow;         /* then grow the 1 KiB bin and exit with 100 blocks in it */
  tes_heap_t *heap;  /* out: the thread's heap */
  uint32_t grown;    /* out: the 1 KiB bin's limit after the rounds */
} thread_arg_t;

/* The park (bin_park) sets a grown bin's limit back and keeps the blocks
 * whose pages stay in use. */
static void *thread_checks_heap(void *arg) {
  thread_arg_t *t = arg;
  free(malloc(64));
  t->heap = tes_tls_heap;
  int bad = check_limits("a thread's heap", t->heap, t->on, false);
  if (!t->grow) return (void *)(intptr_t)bad;
  enum { N = 100 };
  void *kb[N];
  for (int i = 0; i < N; i++) kb[i] = malloc(1000);
  tes_bin_t *kbin = &t->heap->bins[tes_class_of(1000)];
  for (int round = 0; round < 20 && (round < 4 || kbin->limit <= 64); round++) {
    for (int i = 0; i < N; i++) free(kb[i]);
    for (int i = 0; i < N; i++) kb[i] = malloc(1000);
  }
  t->grown = kbin->limit;
  for (int i = 0; i < N; i++) free(kb[i]);
  return (void *)(intptr_t)bad;
}

static int run_thread(void *(*fn)(void *), void *arg) {
  pthread_t t;
  void *ret;
  REQUIRE(pthread_create(&t, NULL, fn, arg) == 0, "pthread_create");
  REQUIRE(pthread_join(t, &ret) == 0, "pthread_join");
  return (int)(intptr_t)ret;
}

int main(void) {
  /* No timed flush (nor parked heap abandoned) while the test runs: the
   * first slow path's flush puts the next one an hour away. */
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 3600000) == 0, "purge delay");
  /* The table against the formula's values that unit_bin spells out. */
  CHECK(formula(0, 64, 256) == 64 && formula(tes_class_of(1032), 64, 256) == 32 &&
            formula(tes_class_of(40000), 64, 256) == 6 && formula(TES_CLASS_COUNT - 1, 64, 256) == 2,
        "the formula itself");
  free(malloc(100));
  tes_heap_t *heap = tes_tls_heap;
  REQUIRE(!heap->is_static, "no thread heap after the first malloc");
  CHECK(check_limits("a new heap", heap, true, false) == 0, "new heap");

  /* Bins grown, bins holding blocks, bins with pops counted: a flush
   * (collect) folds, gives back and sets every one of them. */
  enum { N = 100 };
  void *kb[N], *held[TES_CLASS_COUNT];
  /* Every third class's page first: a new segment's growth trim
   * (growth_trim) gives other classes' bins back. */
  for (unsigned c = 0; c < TES_CLASS_COUNT; c += 3) held[c] = malloc(tes_class_size(c));
  tes_bin_t *kbin = &heap->bins[tes_class_of(1000)];
  for (int i = 0; i < N; i++) kb[i] = malloc(1000);
  for (int round = 0; round < 20 && (round < 4 || kbin->limit <= 64); round++) {
    for (int i = 0; i < N; i++) free(kb[i]);
    for (int i = 0; i < N; i++) kb[i] = malloc(1000);
  }
  REQUIRE(kbin->limit > 64 && heap->bins_grown != 0, "the 1 KiB bin did not grow (limit %u)", kbin->limit);
  for (int i = 0; i < N; i++) free(kb[i]);
  for (unsigned c = 0; c < TES_CLASS_COUNT; c += 3) free(held[c]);
  unsigned popped = tes_class_of(48);
  for (int i = 0; i < 10; i++) free(malloc(48));
  uint64_t pops = tes_bin_pops(&heap->bins[popped]), allocs = heap->counters.class_allocs[popped];
  CHECK(pops > 0 && tes_bin_held(kbin) == N, "before the flush: pops %llu, 1 KiB bin holds %u",
        (unsigned long long)pops, tes_bin_held(kbin));
  tes_collect(false);
  CHECK(check_limits("after a flush", heap, true, true) == 0, "flush");
  CHECK(heap->bins_grown == 0, "grown %zu after the flush", heap->bins_grown);
  CHECK(heap->counters.class_allocs[popped] >= allocs + pops, "48 B pops not folded: allocs %llu -> %llu, %llu pops",
        (unsigned long long)allocs, (unsigned long long)heap->counters.class_allocs[popped], (unsigned long long)pops);
  /* A flush of untouched bins leaves them as they are. */
  tes_collect(false);
  CHECK(check_limits("a second flush", heap, true, true) == 0, "second flush");

  /* TESSERA_BINS off: every limit 0 at the next flush, and in a new heap. */
  REQUIRE(tes_option_set(TES_OPTION_BINS, 0) == 0, "bins option");
  free(malloc(100)); /* a block in a bin, given back by the flush */
  tes_collect(false);
  CHECK(check_limits("bins off", heap, false, true) == 0, "bins off");
  thread_arg_t a = {.on = false};
  CHECK(run_thread(thread_checks_heap, &a) == 0, "a new heap with bins off");
  REQUIRE(tes_option_set(TES_OPTION_BINS, 1) == 0, "bins option");
  tes_collect(false);
  CHECK(check_limits("bins on again", heap, true, true) == 0, "bins on");

  /* Parked heaps: b takes a's, parked while the bins were off (its limits
   * stay 0 until its first flush, which this purge delay puts off), and
   * exits with the bins on; c takes it, with every limit the table's, and
   * grows its 1 KiB bin; d takes it after that park. */
  thread_arg_t b = {.on = false}, c = {.on = true, .grow = true}, d = {.on = true};
  CHECK(run_thread(thread_checks_heap, &b) == 0, "a heap parked with the bins off");
  CHECK(run_thread(thread_checks_heap, &c) == 0, "a heap parked with the bins on");
  CHECK(c.grown > 64, "the 1 KiB bin of the heap taken over did not grow (limit %u)", c.grown);
  CHECK(run_thread(thread_checks_heap, &d) == 0, "a heap parked with a grown bin");
  CHECK(b.heap == a.heap && c.heap == a.heap && d.heap == a.heap,
        "the threads did not take the parked heap over (%p, %p, %p, parked %p)", (void *)b.heap, (void *)c.heap,
        (void *)d.heap, (void *)a.heap);
  return unit_finish("unit_bin_limits");
}
