/* api_large_race.c — a large block's owner exits while another thread grows
 * the block with realloc (the mremap path, where the block is off the list
 * of large blocks for a moment). The block must come out owned by no heap:
 * new heaps (whose structs may be the exited thread's, reused) hold no
 * blocks, destroying them leaves it alone, and it keeps its contents.
 * Before the fix (large.c, large_moving) the block kept pointing at the dead
 * heap's struct: a new heap listed it and tes_heap_destroy freed it under
 * its user (5 runs of 5 within 300 tries). Each try: one owner thread, one
 * grower; at most TRIES tries or SECONDS seconds. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <stdatomic.h>

enum { TRIES = 300, SECONDS = 6, FIRST = 5 << 20, STEP = 4 << 20, STEPS = 100 };

static _Atomic(unsigned char *) shared;
static _Atomic int growing;

static void *owner(void *arg) {
  (void)arg;
  unsigned char *p = malloc(FIRST);
  REQUIRE(p != NULL, "malloc");
  memset(p, 0x5A, FIRST);
  atomic_store(&shared, p);
  while (!atomic_load(&growing)) {
  }
  return NULL; /* exits while the grower reallocs: the heap is abandoned */
}

static void *grower(void *arg) {
  (void)arg;
  unsigned char *p;
  while ((p = atomic_load(&shared)) == NULL) {
  }
  atomic_store(&growing, 1);
  size_t size = FIRST;
  for (int i = 0; i < STEPS; i++) { /* every step crosses the segment's end: mremap */
    size += STEP;
    p = realloc(p, size);
    REQUIRE(p != NULL, "realloc to %zu bytes", size);
  }
  atomic_store(&shared, p);
  return NULL;
}

static size_t blocks_seen;
static bool count_block(const tes_block_info_t *block, void *arg) {
  (void)block, (void)arg;
  blocks_seen++;
  return true;
}

static bool pattern_intact(const unsigned char *p) {
  for (size_t i = 0; i < FIRST; i += 4096)
    if (p[i] != 0x5A) return false;
  return p[FIRST - 1] == 0x5A;
}

int main(void) {
  API_GROUP("a large block grown by realloc while its owner exits");
  double until = api_now_seconds() + SECONDS;
  int tries = 0;
  for (; tries < TRIES && api_now_seconds() < until; tries++) {
    atomic_store(&shared, NULL);
    atomic_store(&growing, 0);
    pthread_t a, b;
    REQUIRE(pthread_create(&a, NULL, owner, NULL) == 0, "pthread_create");
    REQUIRE(pthread_create(&b, NULL, grower, NULL) == 0, "pthread_create");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    unsigned char *live = atomic_load(&shared);
    /* Heap structs are pooled: new heaps may reuse the exited thread's. */
    tes_heap_t *heaps[3];
    for (int k = 0; k < 3; k++) {
      heaps[k] = tes_heap_new();
      REQUIRE(heaps[k] != NULL, "tes_heap_new");
      blocks_seen = 0;
      tes_heap_visit(heaps[k], count_block, NULL);
      CHECK(blocks_seen == 0, "try %d: a new heap holds %zu block(s)", tries, blocks_seen);
    }
    for (int k = 0; k < 3; k++) tes_heap_destroy(heaps[k]);
    CHECK(pattern_intact(live), "try %d: the grown block lost its contents", tries);
    /* Still a live block of ours: a new large block cannot be placed on it. */
    unsigned char *other = malloc(FIRST);
    REQUIRE(other != NULL, "malloc");
    CHECK(other + FIRST <= live || other >= live + FIRST, "try %d: a new block overlaps the grown one", tries);
    free(other);
    free(live);
    if (api_failures) break;
  }
  printf("%d tries\n", tries);
  return api_finish("api_large_race");
}
