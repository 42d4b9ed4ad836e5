/* api_heaps_mt.c — first-class heaps under thread churn, black-box.
 *
 * Generations of threads share one table of blocks. Each thread, at random:
 * puts a fresh malloc block into the table (freeing the one it replaces,
 * mostly another thread's), empties a slot, grows a slot's block with
 * realloc, and keeps blocks of a first-class heap of its own, which it
 * reallocates and now and then destroys (its blocks go with it) or deletes
 * (its blocks move to the table, for other threads to free). Threads exit
 * with blocks still in the table, so their segments are abandoned and
 * adopted by later threads. Every block carries a check word and a fill
 * pattern, verified before each free and at the end: a block handed out
 * twice, or memory returned while a block lives in it, shows up as a broken
 * pattern or a crash.
 *
 * Before 195d57c a first-class heap could adopt an exited thread's segment,
 * and tes_heap_destroy then returned it with the live blocks in it: this
 * test aborted with "invalid free" or crashed in every run.
 *
 * Linked with libtessera; the sanitizer trees (tests/sanitize) build it
 * with TES_API_ONLY, where the same calls go through tes_malloc, tes_free
 * and tes_realloc and the sanitizer keeps malloc. */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <pthread.h>
#include <stdatomic.h>

#ifdef TES_API_ONLY
#define MALLOC tes_malloc
#define FREE tes_free
#define REALLOC tes_realloc
#else
#define MALLOC malloc
#define FREE free
#define REALLOC realloc
#endif

enum { SLOTS = 2048, THREADS = 6, GENERATIONS = 12, STEPS = 15000, KEPT = 256 };

typedef struct block_s {
  size_t size; /* bytes requested, this header included */
  uint64_t check;
} block_t;

static _Atomic(block_t *) table[SLOTS];
static atomic_long broken;   /* blocks whose check word or pattern changed */
static atomic_long failures; /* allocations that returned NULL */

static uint64_t next_random(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

static uint64_t check_word(const block_t *b) { return (uint64_t)(uintptr_t)b * 0x9E3779B97F4A7C15ull ^ b->size; }

static block_t *fill(block_t *b, size_t size) {
  if (b == NULL) {
    atomic_fetch_add(&failures, 1);
    return NULL;
  }
  b->size = size;
  b->check = check_word(b);
  memset(b + 1, (int)(size & 0xff), size - sizeof *b);
  return b;
}

static bool intact(const block_t *b) {
  if (b->check != check_word(b)) return false;
  const unsigned char *bytes = (const unsigned char *)(b + 1);
  for (size_t i = 0; i < b->size - sizeof *b; i++)
    if (bytes[i] != (unsigned char)(b->size & 0xff)) return false;
  return true;
}

/* Free b unless its contents changed (then count it and leak it: freeing
 * a block that is not what it should be could corrupt more). */
static void release(block_t *b) {
  if (b == NULL) return;
  if (!intact(b)) {
    atomic_fetch_add(&broken, 1);
    return;
  }
  FREE(b);
}

static size_t random_size(uint64_t *rng) {
  size_t extra = next_random(rng) % 100 == 0 ? next_random(rng) % 70000 : next_random(rng) % 300;
  return sizeof(block_t) + 1 + extra;
}

static void *churn(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg;
  tes_heap_t *heap = NULL;
  block_t *kept[KEPT];
  int nkept = 0;
  for (int step = 0; step < STEPS; step++) {
    unsigned choice = (unsigned)(next_random(&rng) % 100);
    size_t size = random_size(&rng);
    if (choice < 40) { /* a fresh block replaces a slot's */
      block_t *b = fill(MALLOC(size), size);
      if (b) release(atomic_exchange(&table[next_random(&rng) % SLOTS], b));
    } else if (choice < 60) { /* a block of this thread's own heap */
      if (heap == NULL) heap = tes_heap_new();
      if (heap == NULL) {
        atomic_fetch_add(&failures, 1);
        continue;
      }
      block_t *b = fill(tes_heap_malloc(heap, size), size);
      if (b == NULL) continue;
      if (nkept < KEPT) {
        kept[nkept++] = b;
      } else {
        release(kept[step % KEPT]);
        kept[step % KEPT] = b;
      }
    } else if (choice < 62 && heap != NULL) { /* the heap goes: destroyed or deleted */
      for (int i = 0; i < nkept; i++)
        if (!intact(kept[i])) atomic_fetch_add(&broken, 1);
      if (next_random(&rng) & 1) {
        tes_heap_destroy(heap);
      } else {
        tes_heap_delete(heap); /* its blocks stay valid: other threads free them */
        for (int i = 0; i < nkept; i++) release(atomic_exchange(&table[next_random(&rng) % SLOTS], kept[i]));
      }
      heap = NULL;
      nkept = 0;
    } else if (choice < 64 && heap != NULL && nkept > 0) { /* realloc within the heap */
      block_t *b = kept[nkept - 1];
      if (!intact(b)) atomic_fetch_add(&broken, 1);
      block_t *grown = fill(tes_heap_realloc(heap, b, size), size);
      if (grown) kept[nkept - 1] = grown;
      else nkept--; /* the old block is still there, and the heap's own */
    } else if (choice < 90) { /* a slot emptied */
      release(atomic_exchange(&table[next_random(&rng) % SLOTS], NULL));
    } else { /* a slot's block grown or shrunk by realloc, likely another thread's */
      block_t *b = atomic_exchange(&table[next_random(&rng) % SLOTS], NULL);
      if (b == NULL) continue;
      if (!intact(b)) {
        atomic_fetch_add(&broken, 1);
        continue;
      }
      size_t new_size = sizeof(block_t) + 1 + next_random(&rng) % 2000;
      block_t *moved = fill(REALLOC(b, new_size), new_size);
      if (moved) release(atomic_exchange(&table[next_random(&rng) % SLOTS], moved));
    }
  }
  if (heap != NULL) {
    for (int i = 0; i < nkept; i++)
      if (!intact(kept[i])) atomic_fetch_add(&broken, 1);
    tes_heap_destroy(heap);
  }
  return NULL;
}

static bool sum_usable(const tes_block_info_t *block, void *arg) {
  *(size_t *)arg += block->usable_size;
  return true;
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
#ifndef TES_API_ONLY
  REQUIRE(api_malloc_is_linked_tessera(), "api_heaps_mt must be linked with libtessera");
#endif
  API_GROUP("first-class heaps, thread churn, abandoned segments");
  for (int g = 0; g < GENERATIONS; g++) {
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
      uintptr_t seed = (uintptr_t)(g * THREADS + t + 1) * 0x9E3779B1u;
      REQUIRE(pthread_create(&threads[t], NULL, churn, (void *)seed) == 0, "pthread_create");
    }
    for (int t = 0; t < THREADS; t++) REQUIRE(pthread_join(threads[t], NULL) == 0, "pthread_join");
    if (g % 4 == 3) tes_collect(true); /* adopt what exited threads left, too */
  }
  for (int i = 0; i < SLOTS; i++) release(atomic_exchange(&table[i], NULL));
  CHECK(atomic_load(&broken) == 0, "%ld blocks changed while live", atomic_load(&broken));
  CHECK(atomic_load(&failures) == 0, "%ld allocations failed", atomic_load(&failures));
  /* Quiet now: the statistics and the live-block walk must agree to the
   * byte, in both builds (the hardened one counts neither its canary
   * padding). */
  size_t walked = 0;
  tes_heap_visit(NULL, sum_usable, &walked);
  tes_stats_t st;
  tes_stats_get(&st);
  CHECK((int64_t)walked == st.in_use.current, "tes_heap_visit finds %zu bytes in use, tes_stats_get says %lld",
        walked, (long long)st.in_use.current);
  return api_finish("api_heaps_mt");
}
