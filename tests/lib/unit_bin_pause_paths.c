/* unit_bin_pause_paths.c — the paths around a heap whose bins are paused
 * (heap.c, bins_window_end; twenty-ninth session, bpz29, reviewed by
 * rev29): while a heap's bins are paused,
 *  - a malloc slow path that finds its class's head page dry with blocks on
 *    local_free must not grow the bin (bin_grow: the limit stays 0);
 *  - tes_collect keeps the pause (the limits stay 0) and the stats still
 *    count each malloc of the class once (class_malloc_calls) and its live
 *    blocks (class_live_blocks);
 *  - a double free in a row (the page's list head) is still reported;
 *  - the heap's park (thread exit) hands its next owner bins that are on.
 * Then a stress: threads that alternate page-heavy rounds (which pause
 * their bins) with bin-heavy ones, free a share of their blocks in other
 * threads and exit (parks, adoptions), all blocks' contents checked.
 * Windows are counted by the heap's next flush time moving (bins_due), so
 * the test waits for flushes, not for a clock. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define DELAY_MS 5
#define ROUND 20000 /* page-heavy: a bin holds at most 4,096 (TES_BIN_GROWN_BLOCKS) */
#define MAX_WINDOWS 400

static void *round_blocks[ROUND];

/* Page-heavy rounds of 48 B blocks until the heap's bins are paused (every
 * limit 0); false if MAX_WINDOWS windows passed without. */
static bool pause_bins(tes_heap_t *heap) {
  int64_t due = heap->bins_due;
  for (int windows = 0; windows < MAX_WINDOWS;) {
    for (int i = 0; i < ROUND; i++) {
      round_blocks[i] = malloc(48);
      REQUIRE(round_blocks[i] != NULL, "malloc failed");
      *(volatile char *)round_blocks[i] = (char)i;
    }
    for (int i = 0; i < ROUND; i++) free(round_blocks[i]);
    if (heap->bins_paused != 0) return true;
    if (heap->bins_due != due) {
      due = heap->bins_due;
      windows++;
    }
  }
  return false;
}

static bool all_limits_zero(const tes_heap_t *heap, unsigned *bad) {
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++)
    if (heap->bins[c].limit != 0 || heap->bins[c].most != 0) {
      *bad = c;
      return false;
    }
  return true;
}

static int64_t class_live(unsigned c) {
  static tes_stats_t s;
  tes_stats_get(&s);
  return s.class_live_blocks[c];
}
static uint64_t class_mallocs(unsigned c) {
  static tes_stats_t s;
  tes_stats_get(&s);
  return s.class_malloc_calls[c];
}

static int err_fd = -1;
static off_t err_size(void) { return lseek(err_fd, 0, SEEK_END); }

static tes_heap_t *paused_heap; /* the paths thread's heap, parked at its exit */

static void *paused_paths(void *arg) {
  (void)arg;
  free(malloc(48));
  tes_heap_t *heap = tes_tls_heap;
  REQUIRE(!heap->is_static, "no thread heap after the first malloc");
  REQUIRE(pause_bins(heap), "page-heavy rounds did not pause the bins in %d windows", MAX_WINDOWS);
  unsigned c48 = tes_class_of(48), bad = 0;
  CHECK(all_limits_zero(heap, &bad), "paused, class %u has limit %u most %u", bad, heap->bins[bad].limit,
        heap->bins[bad].most);

  /* bin_grow: the head page dry, its blocks on local_free. */
  for (int i = 0; i < ROUND; i++) round_blocks[i] = malloc(48);
  for (int i = 0; i < ROUND; i++) free(round_blocks[i]);
  void *one = malloc(48);
  if (heap->bins_paused != 0)
    CHECK(heap->bins[c48].limit == 0, "a paused bin grew to %u", heap->bins[c48].limit);
  free(one);

  /* tes_collect keeps the pause; the stats count every malloc once. */
  tes_collect(false);
  if (heap->bins_paused != 0)
    CHECK(all_limits_zero(heap, &bad), "after tes_collect, class %u has limit %u", bad, heap->bins[bad].limit);
  unsigned c200 = tes_class_of(200);
  uint64_t mallocs = class_mallocs(c200);
  int64_t live = class_live(c200);
  void *blocks[100];
  for (int round = 0; round < 5; round++) {
    for (int i = 0; i < 100; i++) blocks[i] = malloc(200);
    for (int i = 0; i < 100; i++) free(blocks[i]);
  }
  for (int i = 0; i < 100; i++) blocks[i] = malloc(200);
  CHECK(class_mallocs(c200) - mallocs == 600, "class of 200 B: %llu mallocs counted of 600",
        (unsigned long long)(class_mallocs(c200) - mallocs));
  CHECK(class_live(c200) - live == 100, "class of 200 B: %lld live blocks counted of 100",
        (long long)(class_live(c200) - live));
  for (int i = 0; i < 100; i++) free(blocks[i]);
  CHECK(class_live(c200) == live, "class of 200 B: %lld live after all were freed, %lld before",
        (long long)class_live(c200), (long long)live);

  /* A double free in a row, paused: reported, not linked twice. */
  if (heap->bins_paused != 0) {
    off_t before = err_size();
    int saved = dup(2);
    dup2(err_fd, 2);
    char *p = malloc(40);
    free(p);
    free(p);
    dup2(saved, 2);
    close(saved);
    CHECK(err_size() > before, "paused: a double free in a row was not reported");
    char *a = malloc(40), *b = malloc(40);
    CHECK(a != b, "paused: a block handed out twice after its double free");
    free(a);
    free(b);
  }
  paused_heap = heap;
  return NULL; /* parked: the next thread adopts it */
}

static void *adopter(void *arg) {
  free(malloc(48));
  tes_heap_t *heap = tes_tls_heap;
  *(bool *)arg = heap == paused_heap;
  CHECK(heap->bins_paused == 0, "the adopted heap's bins are still paused (%u)", heap->bins_paused);
  CHECK(heap->bins[tes_class_of(48)].limit != 0, "the adopted heap's 48 B bin is off");
  return NULL;
}

/* ---- stress ---- */
#define THREADS 4
#define GENERATIONS 3
#define SHARED 1024
static _Atomic(uint64_t *) shared[SHARED]; /* blocks passed to other threads to free */
static atomic_int paused_seen;

static void fill(uint64_t *b, size_t words, uint64_t tag) {
  for (size_t i = 0; i < words; i++) b[i] = tag ^ (i * 0x9e3779b97f4a7c15ull);
}
static bool intact(const uint64_t *b, size_t words, uint64_t tag) {
  for (size_t i = 0; i < words; i++)
    if (b[i] != (tag ^ (i * 0x9e3779b97f4a7c15ull))) return false;
  return true;
}

static atomic_int corrupt;

/* A block of the shared table, with its size in words in its first word
 * and its tag in the second. */
static void shared_free(uint64_t *b) {
  size_t words = (size_t)b[0];
  uint64_t tag = b[1];
  if (!intact(b + 2, words - 2, tag)) atomic_fetch_add(&corrupt, 1);
  free(b);
}

static void *stresser(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  uint64_t seed = id * 7919 + 1;
  static _Thread_local uint64_t *mine[4096];
  free(malloc(48));
  tes_heap_t *heap = tes_tls_heap;
  for (int phase = 0; phase < 6; phase++) {
    int64_t due = heap->bins_due;
    int windows = 0;
    while (windows < 3) {
      /* Page-heavy phases: 4,096 blocks at a time; bin-heavy: 32. */
      int n = phase % 2 == 0 ? 4096 : 32;
      size_t words = 4 + (size_t)(seed % 12);
      for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        mine[i] = malloc(words * 8);
        REQUIRE(mine[i] != NULL, "malloc failed");
        mine[i][0] = words;
        mine[i][1] = seed;
        fill(mine[i] + 2, words - 2, seed);
      }
      for (int i = 0; i < n; i++) {
        if (!intact(mine[i] + 2, words - 2, mine[i][1])) atomic_fetch_add(&corrupt, 1);
        if ((mine[i][1] >> 33) % 8 == 0) { /* an eighth to another thread's free */
          uint64_t *old = atomic_exchange(&shared[(mine[i][1] >> 20) % SHARED], mine[i]);
          if (old != NULL) shared_free(old);
        } else {
          free(mine[i]);
        }
      }
      if (heap->bins_paused != 0) atomic_store(&paused_seen, 1);
      if (heap->bins_due != due) {
        due = heap->bins_due;
        windows++;
      }
    }
  }
  return NULL;
}

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, DELAY_MS) == 0, "cannot set the purge delay");
  REQUIRE(tes_option_get(TES_OPTION_BINS) == 1 && tes_option_get(TES_OPTION_HEAP_PARK) == 1,
          "run with the default TESSERA_BINS and TESSERA_HEAP_PARK");
  tes_option_set(TES_OPTION_ABORT_ON_ERROR, 0);
  char path[] = "/tmp/tessera-bin-pause-XXXXXX";
  err_fd = mkstemp(path);
  REQUIRE(err_fd >= 0, "mkstemp");
  unlink(path);

  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, paused_paths, NULL) == 0 && pthread_join(t, NULL) == 0, "paths thread");
  bool adopted = false;
  REQUIRE(pthread_create(&t, NULL, adopter, &adopted) == 0 && pthread_join(t, NULL) == 0, "adopter thread");

  for (int g = 0; g < GENERATIONS; g++) {
    pthread_t ts[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
      REQUIRE(pthread_create(&ts[i], NULL, stresser, (void *)(i + 1 + g * THREADS)) == 0, "pthread_create");
    for (int i = 0; i < THREADS; i++) pthread_join(ts[i], NULL);
  }
  for (int i = 0; i < SHARED; i++) {
    uint64_t *b = atomic_exchange(&shared[i], NULL);
    if (b != NULL) shared_free(b);
  }
  tes_collect(true);

  char text[512];
  ssize_t n = pread(err_fd, text, sizeof text - 1, 0);
  text[n > 0 ? n : 0] = '\0';
  close(err_fd);
  CHECK(atomic_load(&corrupt) == 0, "stress: %d blocks changed while live", atomic_load(&corrupt));
  printf("adopted the paused heap: %s; stress threads saw a pause: %s; stderr: \"%.200s\"\n", adopted ? "yes" : "no",
         atomic_load(&paused_seen) ? "yes" : "no", text);
  return unit_finish("unit_bin_pause_paths");
}
