/* Workload `threads` (seed row 6): N threads each run batches of 64
 * malloc(16-512 B) followed by 64 frees of their own blocks. The total work is
 * fixed and split between the threads, so with more threads than cores the
 * time shows how the allocator copes with contention and preemption rather
 * than how much work was done. Blocks never cross threads (see `prodcons`,
 * `larson` and `mstress` for that). */
#include "wl_common.h"

#include <pthread.h>

#define BATCH 64

typedef struct worker_s {
  long batches;
  uint64_t seed;
} worker_t;

static void *worker(void *arg) {
  worker_t *w = arg;
  uint64_t rng = w->seed;
  char *blocks[BATCH];
  for (long b = 0; b < w->batches; b++) {
    for (int i = 0; i < BATCH; i++) {
      blocks[i] = wl_check(malloc(wl_rand_range(&rng, 16, 512)), "malloc returned NULL");
      blocks[i][0] = (char)i;
    }
    for (int i = 0; i < BATCH; i++) {
      if (blocks[i][0] != (char)i) wl_fail("block contents overwritten");
      free(blocks[i]);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "threads: N threads, each allocating and freeing its own batches of 64 blocks");
  long total = wl_scaled(&o, 600000L, 100);
  pthread_t tid[1024];
  worker_t w[1024];
  double t0 = wl_now();
  for (int t = 0; t < o.threads; t++) {
    w[t].batches = total / o.threads;
    w[t].seed = o.seed + (uint64_t)t * 7919;
    if (pthread_create(&tid[t], NULL, worker, &w[t])) wl_fail("pthread_create failed");
  }
  for (int t = 0; t < o.threads; t++) pthread_join(tid[t], NULL);
  wl_report(wl_now() - t0, (double)(total / o.threads) * o.threads * BATCH);
  return 0;
}
