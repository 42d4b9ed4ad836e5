/* soak_collect_fresh.c — tes_collect(true) from a thread that never
 * allocated must still collect what exited threads left behind.
 *
 *   soak_collect_fresh [ROUNDS]      (default 3)
 *
 * Each round: a producer thread allocates 1000 blocks of 1000 bytes and
 * exits (its heap is abandoned); a consumer thread frees them all (remote
 * frees into the abandoned pages) and exits; then a third, fresh thread that
 * has never allocated calls tes_collect(true). Asserted: after that, the
 * allocator's live bytes are back at the baseline (nothing stays counted as
 * in use once every block is freed and a forced collect ran), in every
 * round. The main thread also never allocates through libtessera after the
 * baseline, so no other heap can do the collecting in its place.
 * Found by the sanitizer run of soak_prodcons (whose main thread, in the
 * tes_* build, had not allocated either). */
#define _GNU_SOURCE
#include "soak_common.h"

#include <pthread.h>

enum { BLOCKS = 1000, SIZE = 1000 };
static void *blocks[BLOCKS];
static tes_stats_t after_collect;

static void *producer(void *arg) {
  (void)arg;
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = soak_malloc(SIZE);
    SOAK_CHECK(blocks[i] != NULL);
    soak_fill(blocks[i], SIZE, (uint64_t)i);
  }
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  for (int i = 0; i < BLOCKS; i++) {
    SOAK_CHECK(soak_intact(blocks[i], SIZE, (uint64_t)i));
    soak_free(blocks[i]);
  }
  return NULL;
}

static void *collector(void *arg) {
  (void)arg;
  tes_collect(true);
  tes_stats_get(&after_collect);
  return NULL;
}

static void run_thread(void *(*fn)(void *)) {
  pthread_t t;
  SOAK_CHECK(pthread_create(&t, NULL, fn, NULL) == 0);
  SOAK_CHECK(pthread_join(t, NULL) == 0);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  soak_require_tessera();
  tes_stats_t baseline;
  tes_stats_get(&baseline);
  int failures = 0;
  for (int r = 0; r < rounds; r++) {
    run_thread(producer);
    run_thread(consumer);
    run_thread(collector);
    long long stranded = (long long)(after_collect.in_use.current - baseline.in_use.current);
    printf("round %d: live bytes %lld above the baseline after every block was freed and a "
           "fresh thread ran tes_collect(true) (committed %lld)\n",
           r, stranded, (long long)after_collect.committed.current);
    if (stranded > 64 * 1024) failures++;
  }
  if (failures) {
    fprintf(stderr, "soak_collect_fresh: %d of %d rounds left freed blocks counted as live\n",
            failures, rounds);
    return 1;
  }
  return 0;
}
