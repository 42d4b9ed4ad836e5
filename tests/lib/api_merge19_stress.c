/* api_merge19_stress.c — the nineteenth session's four merged changes
 * together (docs/RELIABILITY.md, "Nineteenth session: review of the
 * merges"): large blocks taking cached segments up to four times their
 * mapping (segment.c), growth_trim flushing other classes' bins and
 * retiring empty heads before a new segment (heap.c), parked heaps'
 * purges (tes_heap_park) and the hardened build's medium-class bins.
 *
 * Every block is filled with a pattern of its address and size and checked
 * at its free: a page retired or handed out while a block of it lives, a
 * block handed out twice, a realloc that lost bytes or a large block that
 * overlaps another all show as a pattern broken. The statistics' live
 * block counts and bytes in use must come back to where they started once
 * everything is freed (blocks left in either build's bins are not live).
 *
 * Phases: (1) large blocks around the cache's boundaries (4x the mapping,
 * 4 MiB, above it, aligned), realloc'd in place and moving; (2) four
 * first-class heaps and the default heap allocating across every class,
 * freeing at random (bins fill, classes are left, growth_trim runs at each
 * new segment), heaps destroyed with blocks in their bins; (3) threads that
 * allocate, hand blocks to another thread and exit (parked heaps, their
 * purges, growth_trim in the heaps that take them over). The same source
 * runs in the default build, the hardened one (.secure), with
 * TESSERA_BINS=0 and under the sanitizers (TES_API_ONLY: tes_* only). */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB ((size_t)1 << 10)
#define MIB_ ((size_t)1 << 20)

static uint64_t seed_base; /* argument `seed=N`: another run of the same shapes */
static uint64_t rnd(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* A pattern of the block's address, its size and a generation, written
 * over the first and last 64 bytes and every 4 KiB between (a whole
 * write of each large block would be slow under the sanitizers). */
static inline uint8_t pat(const void *p, size_t size, uint32_t gen, size_t i) {
  uintptr_t a = (uintptr_t)p;
  return (uint8_t)((a >> 4) ^ (a >> 12) ^ size ^ (size >> 8) ^ gen ^ (i * 131u) ^ (i >> 9));
}
static void fill(void *p, size_t size, uint32_t gen) {
  uint8_t *b = p;
  for (size_t i = 0; i < size; i = (i < 64 || i + 64 >= size) ? i + 1 : (i + 4096 < size - 64 ? i + 4096 : size - 64))
    b[i] = pat(p, size, gen, i);
}
/* The first `size` bytes still hold the pattern written for (p0, size0). */
static bool same(const void *p, size_t size, const void *p0, size_t size0, uint32_t gen) {
  const uint8_t *b = p;
  for (size_t i = 0; i < size; i = (i < 64 || i + 64 >= size0) ? i + 1 : (i + 4096 < size0 - 64 ? i + 4096 : size0 - 64))
    if (i < size0 && b[i] != pat(p0, size0, gen, i)) return false;
  return true;
}

static int64_t live_blocks(void) {
  tes_stats_t st;
  tes_stats_get(&st);
  int64_t n = 0;
  for (uint32_t c = 0; c < st.class_count && c < TES_STATS_MAX_CLASSES; c++) n += st.class_live_blocks[c];
  return n;
}
static int64_t in_use(void) {
  tes_stats_t st;
  tes_stats_get(&st);
  return st.in_use.current;
}

/* ---- (1) large blocks ---------------------------------------------------- */
static void phase_large(void) {
  API_GROUP("large");
  static const size_t sizes[] = {
      129 * KIB, 200 * KIB, 256 * KIB, 1 * MIB_ - 1, 1 * MIB_, 1 * MIB_ + 1, 2 * MIB_ - 4096, 3 * MIB_,
      4 * MIB_ - 4096 * 2, 4 * MIB_ - 1, 4 * MIB_, 4 * MIB_ + 1, 5 * MIB_, 6 * MIB_ + 77, 16 * MIB_ + 123,
  };
  static const size_t aligns[] = {0, 4096, 64 * KIB, 1 * MIB_, 4 * MIB_, 8 * MIB_};
  enum { N = 12, ROUNDS = 300 };
  void *blk[N] = {0};
  size_t sz[N] = {0};
  uint32_t gen[N] = {0};
  uint64_t s = 12345 + seed_base * 7919;
  int64_t used0 = in_use();
  for (int r = 0; r < ROUNDS; r++) {
    int i = (int)(rnd(&s) % N);
    if (blk[i] != NULL) {
      CHECK(same(blk[i], sz[i], blk[i], sz[i], gen[i]), "round %d: block %p of %zu changed while live", r, blk[i], sz[i]);
      uint64_t op = rnd(&s) % 4;
      if (op == 0) { /* realloc: in place or moving, larger or smaller */
        size_t ns = sizes[rnd(&s) % (sizeof sizes / sizeof sizes[0])] + (rnd(&s) % 3) * 4096;
        void *old = blk[i];
        size_t keep = ns < sz[i] ? ns : sz[i];
        void *q = tes_realloc(blk[i], ns);
        REQUIRE(q != NULL, "realloc to %zu failed", ns);
        CHECK(same(q, keep, old, sz[i], gen[i]), "round %d: realloc %p (%zu) -> %p (%zu) lost bytes", r, old, sz[i], q, ns);
        CHECK(tes_usable_size(q) >= ns, "usable %zu < %zu", tes_usable_size(q), ns);
        blk[i] = q;
        sz[i] = ns;
        gen[i]++;
        fill(q, ns, gen[i]);
        continue;
      }
      tes_free(blk[i]);
      blk[i] = NULL;
      continue;
    }
    size_t size = sizes[rnd(&s) % (sizeof sizes / sizeof sizes[0])];
    size_t al = aligns[rnd(&s) % (sizeof aligns / sizeof aligns[0])];
    void *p = al ? tes_aligned_alloc(al, (size + al - 1) / al * al) : tes_malloc(size);
    if (al) size = (size + al - 1) / al * al;
    REQUIRE(p != NULL, "malloc %zu (alignment %zu) failed", size, al);
    CHECK(al == 0 || ((uintptr_t)p & (al - 1)) == 0, "%p not aligned to %zu", p, al);
    CHECK(tes_usable_size(p) >= size, "usable %zu < %zu", tes_usable_size(p), size);
    for (int j = 0; j < N; j++) /* no overlap with a live block */
      if (blk[j] != NULL)
        CHECK((uintptr_t)p + size <= (uintptr_t)blk[j] || (uintptr_t)blk[j] + sz[j] <= (uintptr_t)p,
              "%p (%zu) overlaps %p (%zu)", p, size, blk[j], sz[j]);
    blk[i] = p;
    sz[i] = size;
    gen[i] = (uint32_t)r;
    fill(p, size, gen[i]);
    if (r % 50 == 49) tes_collect(r % 100 == 99); /* the cache purged (and dropped) under live blocks */
  }
  for (int i = 0; i < N; i++)
    if (blk[i] != NULL) {
      CHECK(same(blk[i], sz[i], blk[i], sz[i], gen[i]), "block %p of %zu changed while live", blk[i], sz[i]);
      tes_free(blk[i]);
    }
  CHECK(in_use() == used0, "bytes in use %lld after the large blocks, %lld before", (long long)in_use(),
        (long long)used0);
}

/* ---- (2) heaps across the classes ------------------------------------------ */
#define HEAPS 5 /* 0: the thread's default heap (tes_malloc) */
#define SLOTS 1500
typedef struct {
  void *p;
  size_t size;
  uint32_t gen;
} slot_t;
static slot_t slots[HEAPS][SLOTS];

static size_t class_size_pick(uint64_t *s, int epoch) {
  /* Each epoch uses a band of the classes, so classes are left (their bins
   * and heads idle) and others taken up (new segments: growth_trim). */
  uint64_t r = rnd(s);
  switch ((epoch + (int)(r % 3)) % 4) {
  case 0: return 16 + r % 1024;                          /* small */
  case 1: return 1 * KIB + r % (8 * KIB);                 /* small / medium edge */
  case 2: return 8 * KIB + r % (56 * KIB);                /* medium */
  default: return 64 * KIB + r % (64 * KIB - 64);         /* the largest classes */
  }
}

static void slot_free(slot_t *sl) {
  if (sl->p == NULL) return;
  CHECK(same(sl->p, sl->size, sl->p, sl->size, sl->gen), "block %p of %zu changed while live", sl->p, sl->size);
  tes_free(sl->p);
  sl->p = NULL;
}

static void phase_heaps(void) {
  API_GROUP("heaps");
  tes_heap_t *heaps[HEAPS] = {0};
  uint64_t s = 777 + seed_base * 7919;
  int64_t live0 = live_blocks(), used0 = in_use();
  for (int h = 1; h < HEAPS; h++) heaps[h] = tes_heap_new();
  for (int epoch = 0; epoch < 24; epoch++) {
    for (int op = 0; op < 12000; op++) {
      int h = (int)(rnd(&s) % HEAPS);
      slot_t *sl = &slots[h][rnd(&s) % SLOTS];
      if (sl->p != NULL) {
        if (rnd(&s) % 8 == 0) { /* realloc: a binned neighbour's block grows or moves */
          size_t ns = class_size_pick(&s, epoch);
          size_t keep = ns < sl->size ? ns : sl->size;
          CHECK(same(sl->p, sl->size, sl->p, sl->size, sl->gen), "block %p of %zu changed while live", sl->p, sl->size);
          void *q = h == 0 ? tes_realloc(sl->p, ns) : tes_heap_realloc(heaps[h], sl->p, ns);
          REQUIRE(q != NULL, "realloc %zu failed", ns);
          CHECK(same(q, keep, sl->p, sl->size, sl->gen), "realloc %p -> %p lost bytes", sl->p, q);
          sl->p = q;
          sl->size = ns;
          sl->gen++;
          fill(q, ns, sl->gen);
        } else {
          slot_free(sl);
        }
        continue;
      }
      size_t size = class_size_pick(&s, epoch);
      void *p = h == 0 ? tes_malloc(size) : tes_heap_malloc(heaps[h], size);
      REQUIRE(p != NULL, "malloc %zu failed", size);
      CHECK(tes_usable_size(p) >= size, "usable %zu < %zu", tes_usable_size(p), size);
      sl->p = p;
      sl->size = size;
      sl->gen = (uint32_t)op;
      fill(p, size, sl->gen);
    }
    /* Leave the band: free most of what it holds (into the bins). */
    for (int h = 0; h < HEAPS; h++)
      for (int i = 0; i < SLOTS; i++)
        if (slots[h][i].p != NULL && rnd(&s) % 4 != 0) slot_free(&slots[h][i]);
    if (epoch % 6 == 5) {
      /* A first-class heap destroyed with blocks live and in its bins. */
      int h = 1 + epoch / 6 % (HEAPS - 1);
      for (int i = 0; i < SLOTS; i++) /* still checked before they go */
        if (slots[h][i].p != NULL) {
          CHECK(same(slots[h][i].p, slots[h][i].size, slots[h][i].p, slots[h][i].size, slots[h][i].gen),
                "block %p of %zu changed while live", slots[h][i].p, slots[h][i].size);
          slots[h][i].p = NULL;
        }
      tes_heap_destroy(heaps[h]);
      heaps[h] = tes_heap_new();
      REQUIRE(heaps[h] != NULL, "tes_heap_new failed");
    }
    if (epoch % 4 == 3) tes_collect(false);
  }
  for (int h = 0; h < HEAPS; h++) {
    for (int i = 0; i < SLOTS; i++) slot_free(&slots[h][i]);
    if (h > 0) tes_heap_destroy(heaps[h]);
  }
  tes_collect(false);
  CHECK(live_blocks() == live0, "%lld live blocks after everything was freed, %lld before",
        (long long)live_blocks(), (long long)live0);
  CHECK(in_use() == used0, "bytes in use %lld after everything was freed, %lld before", (long long)in_use(),
        (long long)used0);
}

/* ---- (3) threads that exit: parked heaps, taken over ------------------------- */
#define THREADS 2
#define HANDOFF 600
typedef struct {
  void *p[HANDOFF];
  size_t size[HANDOFF];
  int seed;
} handoff_t;

static void *worker(void *arg) {
  handoff_t *out = arg;
  uint64_t s = 1000 + (uint64_t)out->seed + seed_base * 7919;
  static __thread slot_t mine[400];
  for (int op = 0; op < 8000; op++) {
    slot_t *sl = &mine[rnd(&s) % 400];
    if (sl->p != NULL) {
      slot_free(sl);
      continue;
    }
    size_t size = class_size_pick(&s, op / 2000);
    sl->p = tes_malloc(size);
    REQUIRE(sl->p != NULL, "malloc failed");
    sl->size = size;
    sl->gen = 7;
    fill(sl->p, size, 7);
  }
  for (int i = 0; i < 400; i++) slot_free(&mine[i]);
  /* Blocks the next thread frees (remote frees into a parked heap). */
  for (int i = 0; i < HANDOFF; i++) {
    out->size[i] = class_size_pick(&s, i);
    out->p[i] = tes_malloc(out->size[i]);
    REQUIRE(out->p[i] != NULL, "malloc failed");
    fill(out->p[i], out->size[i], 9);
  }
  /* Some of them freed here: into the bins the exit flushes. */
  for (int i = 0; i < HANDOFF; i += 3) {
    CHECK(same(out->p[i], out->size[i], out->p[i], out->size[i], 9), "handed block changed");
    tes_free(out->p[i]);
    out->p[i] = NULL;
  }
  return NULL;
}

static void *idle_thread(void *arg) { return arg; }

static void phase_threads(void) {
  API_GROUP("threads");
  static handoff_t hand[2][THREADS];
  /* glibc keeps its exited threads' stacks and their TLS vectors (a block
   * of malloc, live: 312 B in the hardened build) for the next threads:
   * taken once before the count starts. */
  pthread_t t0[THREADS];
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_create(&t0[i], NULL, idle_thread, NULL) == 0, "pthread_create");
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_join(t0[i], NULL) == 0, "pthread_join");
  int64_t live0 = live_blocks();
  for (int round = 0; round < 12; round++) {
    handoff_t *cur = hand[round & 1], *prev = hand[(round + 1) & 1];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
      cur[i].seed = round * THREADS + i;
      REQUIRE(pthread_create(&t[i], NULL, worker, &cur[i]) == 0, "pthread_create");
    }
    /* Meanwhile: the blocks of the last round's exited threads, freed here. */
    if (round > 0)
      for (int i = 0; i < THREADS; i++)
        for (int j = 0; j < HANDOFF; j++)
          if (prev[i].p[j] != NULL) {
            CHECK(same(prev[i].p[j], prev[i].size[j], prev[i].p[j], prev[i].size[j], 9), "handed block changed");
            tes_free(prev[i].p[j]);
            prev[i].p[j] = NULL;
          }
    for (int i = 0; i < THREADS; i++) REQUIRE(pthread_join(t[i], NULL) == 0, "pthread_join");
    if (round % 4 == 3) tes_collect(round % 8 == 7);
  }
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < THREADS; i++)
      for (int j = 0; j < HANDOFF; j++)
        if (hand[k][i].p[j] != NULL) {
          CHECK(same(hand[k][i].p[j], hand[k][i].size[j], hand[k][i].p[j], hand[k][i].size[j], 9), "handed block changed");
          tes_free(hand[k][i].p[j]);
        }
  tes_collect(true);
  CHECK(live_blocks() == live0, "%lld live blocks after the threads, %lld before", (long long)live_blocks(),
        (long long)live0);
}

int main(int argc, char **argv) {
  REQUIRE(api_allocator_is_tessera(), "libtessera does not serve malloc");
  bool threads_only = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "threads") == 0) threads_only = true;
    if (strncmp(argv[i], "seed=", 5) == 0) seed_base = strtoull(argv[i] + 5, NULL, 10);
  }
  if (!threads_only) {
    phase_large();
    phase_heaps();
  }
  phase_threads();
  return api_finish("api_merge19_stress");
}
