/* soak_threads.c — thread churn: many short-lived threads, each allocating,
 * verifying, freeing, and handing blocks to the next generation.
 *
 *   soak_threads [TOTAL_THREADS [CONCURRENT]]     (default 10000 8)
 *
 * Threads run in waves of CONCURRENT. Each allocates 64 blocks of mixed
 * sizes, checks their contents, frees most of them, frees the blocks the
 * previous wave left behind (blocks whose owning thread has exited: the
 * allocator must accept frees into an abandoned heap) and leaves 8 of its
 * own behind. Asserted: every block keeps its contents, every thread ran,
 * and memory does not grow with the number of threads (a leaked heap per
 * exited thread would): RSS at the end is within 48 MiB of RSS after the
 * first 10% of threads. Prints the figures for docs/RELIABILITY.md. */
#define _GNU_SOURCE
#include "soak_common.h"

#include <pthread.h>
#include <stdatomic.h>

enum { BLOCKS_PER_THREAD = 64, LEFT_BEHIND = 8, MAX_CONCURRENT = 64 };

typedef struct handoff_s {
  unsigned char *ptr[LEFT_BEHIND];
  size_t size[LEFT_BEHIND];
  uint64_t seed[LEFT_BEHIND];
} handoff_t;

/* handoff[i] is filled by thread slot i of one wave and emptied by thread
 * slot i of the next; the join between waves orders the two. */
static handoff_t handoff[MAX_CONCURRENT];
static atomic_ulong threads_ran, blocks_verified;

typedef struct worker_arg_s {
  int slot;
  uint64_t generation;
} worker_arg_t;

static void *worker(void *argp) {
  worker_arg_t *arg = argp;
  uint64_t rng = arg->generation * 7919u + (uint64_t)arg->slot * 104729u + 1;
  unsigned char *ptr[BLOCKS_PER_THREAD];
  size_t size[BLOCKS_PER_THREAD];
  uint64_t seed[BLOCKS_PER_THREAD];
  for (int i = 0; i < BLOCKS_PER_THREAD; i++) {
    uint64_t r = soak_rng(&rng);
    size[i] = (r & 7) == 0 ? 4096 + r % 28000 : 8 + r % 1024;
    seed[i] = r;
    ptr[i] = soak_malloc(size[i]);
    SOAK_CHECK(ptr[i] != NULL);
    soak_fill(ptr[i], size[i], seed[i]);
  }
  /* The previous generation's blocks: their owner has exited. */
  handoff_t *h = &handoff[arg->slot];
  for (int i = 0; i < LEFT_BEHIND; i++) {
    if (!h->ptr[i]) continue;
    SOAK_CHECK(soak_intact(h->ptr[i], h->size[i], h->seed[i]));
    soak_free(h->ptr[i]);
    h->ptr[i] = NULL;
    atomic_fetch_add(&blocks_verified, 1);
  }
  for (int i = 0; i < BLOCKS_PER_THREAD; i++) {
    SOAK_CHECK(soak_intact(ptr[i], size[i], seed[i]));
    atomic_fetch_add(&blocks_verified, 1);
    if (i < LEFT_BEHIND) {
      h->ptr[i] = ptr[i];
      h->size[i] = size[i];
      h->seed[i] = seed[i];
    } else {
      soak_free(ptr[i]);
    }
  }
  atomic_fetch_add(&threads_ran, 1);
  return NULL;
}

int main(int argc, char **argv) {
  long total = argc > 1 ? atol(argv[1]) : 10000;
  long concurrent = argc > 2 ? atol(argv[2]) : 8;
  if (total <= 0 || concurrent <= 0 || concurrent > MAX_CONCURRENT) {
    fprintf(stderr, "usage: %s [TOTAL_THREADS [CONCURRENT<=%d]]\n", argv[0], MAX_CONCURRENT);
    return 2;
  }
  soak_require_tessera();
  size_t rss_baseline = 0;
  long started = 0;
  uint64_t generation = 0;
  while (started < total) {
    pthread_t threads[MAX_CONCURRENT];
    worker_arg_t args[MAX_CONCURRENT];
    long wave = total - started < concurrent ? total - started : concurrent;
    for (long i = 0; i < wave; i++) {
      args[i].slot = (int)i;
      args[i].generation = generation;
      SOAK_CHECK(pthread_create(&threads[i], NULL, worker, &args[i]) == 0);
    }
    for (long i = 0; i < wave; i++) SOAK_CHECK(pthread_join(threads[i], NULL) == 0);
    started += wave;
    generation++;
    if (rss_baseline == 0 && started >= total / 10) rss_baseline = soak_rss_bytes();
  }
  /* The main thread frees what the last wave left behind. */
  for (int s = 0; s < MAX_CONCURRENT; s++)
    for (int i = 0; i < LEFT_BEHIND; i++)
      if (handoff[s].ptr[i]) {
        SOAK_CHECK(soak_intact(handoff[s].ptr[i], handoff[s].size[i], handoff[s].seed[i]));
        soak_free(handoff[s].ptr[i]);
        atomic_fetch_add(&blocks_verified, 1);
      }
  size_t rss_end = soak_rss_bytes();
  printf("soak_threads: %lu threads ran (%ld at a time), %lu blocks verified, "
         "RSS after 10%%: %zu KiB, at end: %zu KiB\n",
         (unsigned long)atomic_load(&threads_ran), concurrent,
         (unsigned long)atomic_load(&blocks_verified), rss_baseline >> 10, rss_end >> 10);
  SOAK_CHECK(atomic_load(&threads_ran) == (unsigned long)total);
  SOAK_CHECK(atomic_load(&blocks_verified) ==
             (unsigned long)total * (BLOCKS_PER_THREAD + LEFT_BEHIND));
  if (rss_end > rss_baseline + ((size_t)48 << 20)) {
    fprintf(stderr, "soak_threads: RSS grew by %zu KiB with thread churn (heaps leaked?)\n",
            (rss_end - rss_baseline) >> 10);
    return 1;
  }
  return 0;
}
