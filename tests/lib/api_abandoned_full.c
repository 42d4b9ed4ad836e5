/* api_abandoned_full.c — a malloc must not fail while memory is left, even
 * when the segments that exited threads abandoned hold only full pages of
 * the requested class.
 *
 * Ten threads at once each fill exactly four pages' worth of 64-byte blocks
 * (1,024 blocks per 64 KiB page) and keep them live; only when all have
 * filled do they exit (a barrier), so no filling thread adopts another's
 * segment, and ten abandoned segments hold nothing but full 64-byte pages. A new thread
 * then asks for 64 bytes: its heap has no page, and every abandoned segment
 * it adopts on the way brings only full pages. The allocator used to adopt
 * two segments per round for four rounds and then return NULL (seen as 1 run
 * in 20 of the larson workload with 8 threads, 8 in 20 once per-class bins
 * kept more blocks live at thread exit). Standard API only, so it also runs
 * against glibc to validate the harness. */
#include "api_check.h"

#include <pthread.h>

enum { THREADS = 10, PER_THREAD = 4 * 1024, SIZE = 64 };

static void *blocks[THREADS][PER_THREAD];
static pthread_barrier_t all_filled;

static void *fill_and_exit(void *arg) {
  void **mine = arg;
  void *result = NULL;
  for (int i = 0; i < PER_THREAD && result == NULL; i++) {
    mine[i] = malloc(SIZE);
    if (mine[i] == NULL) result = (void *)1;
    else *(volatile char *)mine[i] = 1;
  }
  pthread_barrier_wait(&all_filled);
  return result;
}

static void *allocate_after(void *arg) {
  (void)arg;
  for (int i = 0; i < 100; i++) {
    void *p = malloc(SIZE);
    if (p == NULL) return (void *)(uintptr_t)(i + 1);
    free(p);
  }
  return NULL;
}

int main(void) {
  API_GROUP("abandoned segments with only full pages");
  REQUIRE(pthread_barrier_init(&all_filled, NULL, THREADS) == 0, "pthread_barrier_init");
  pthread_t fillers[THREADS];
  for (int t = 0; t < THREADS; t++)
    REQUIRE(pthread_create(&fillers[t], NULL, fill_and_exit, blocks[t]) == 0, "pthread_create");
  for (int t = 0; t < THREADS; t++) {
    void *failed = NULL;
    pthread_join(fillers[t], &failed);
    REQUIRE(failed == NULL, "thread %d: malloc(%d) failed while filling", t, SIZE);
  }
  pthread_t tid;
  void *failed = NULL;
  REQUIRE(pthread_create(&tid, NULL, allocate_after, NULL) == 0, "pthread_create");
  pthread_join(tid, &failed);
  CHECK(failed == NULL, "a new thread's malloc(%d) number %lu returned NULL with memory left", SIZE,
        (unsigned long)(uintptr_t)failed);
  for (int t = 0; t < THREADS; t++)
    for (int i = 0; i < PER_THREAD; i++) free(blocks[t][i]);
  return api_finish("api_abandoned_full");
}
