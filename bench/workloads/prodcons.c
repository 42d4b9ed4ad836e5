/* Workload `prodcons`: cross-thread producer/consumer. Threads come in pairs:
 * the producer allocates blocks of 16-1024 B, stamps them and pushes them
 * through a single-producer/single-consumer ring; the consumer checks the
 * stamp and frees them. Every free is remote, which is the case that makes
 * per-thread allocators pile memory up or take locks (PITFALLS #4). --threads
 * is the total number of threads (pairs = threads/2, at least one pair).
 * yields= counts the sched_yield calls of the waits: it tells which placement
 * a run had when threads outnumber cores (about 4 a ring's turn when a
 * producer and its consumer share a CPU and take turns, far more when they
 * run on two and spin; docs/PERFORMANCE.md, "Twenty-sixth session, pc26"). */
#include "wl_common.h"

#include <pthread.h>
#include <stdatomic.h>

#define RING 1024 /* power of two */

typedef struct pair_s {
  _Alignas(64) _Atomic size_t head; /* written by the producer */
  _Alignas(64) _Atomic size_t tail; /* written by the consumer */
  _Alignas(64) long count;
  uint64_t seed;
  long producer_yields, consumer_yields; /* written once, at each thread's end */
  unsigned char *ring[RING];
} pair_t;

static void *producer(void *arg) {
  pair_t *p = arg;
  uint64_t rng = p->seed;
  long yields = 0;
  for (long i = 0; i < p->count; i++) {
    size_t size = wl_rand_range(&rng, 16, 1024);
    unsigned char *b = wl_check(malloc(size), "malloc returned NULL");
    b[0] = (unsigned char)i;
    b[size - 1] = (unsigned char)size;
    size_t h = atomic_load_explicit(&p->head, memory_order_relaxed);
    while (h - atomic_load_explicit(&p->tail, memory_order_acquire) >= RING) {
      sched_yield();
      yields++;
    }
    p->ring[h & (RING - 1)] = b;
    atomic_store_explicit(&p->head, h + 1, memory_order_release);
  }
  p->producer_yields = yields;
  return NULL;
}

static void *consumer(void *arg) {
  pair_t *p = arg;
  uint64_t rng = p->seed; /* replays the producer's sizes to check stamps */
  long yields = 0;
  for (long i = 0; i < p->count; i++) {
    size_t t = atomic_load_explicit(&p->tail, memory_order_relaxed);
    while (atomic_load_explicit(&p->head, memory_order_acquire) == t) {
      sched_yield();
      yields++;
    }
    unsigned char *b = p->ring[t & (RING - 1)];
    size_t size = wl_rand_range(&rng, 16, 1024);
    if (b[0] != (unsigned char)i || b[size - 1] != (unsigned char)size) wl_fail("block contents overwritten");
    free(b);
    atomic_store_explicit(&p->tail, t + 1, memory_order_release);
  }
  p->consumer_yields = yields;
  return NULL;
}

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "prodcons: producer threads allocate, consumer threads free (pairs, SPSC rings)");
  int pairs = o.threads / 2 > 0 ? o.threads / 2 : 1;
  long total = wl_scaled(&o, 3000000L, 1000);
  pair_t *pair = wl_check(aligned_alloc(64, sizeof(pair_t) * (size_t)pairs), "aligned_alloc returned NULL");
  pthread_t tid[2 * 512];
  double t0 = wl_now();
  for (int k = 0; k < pairs; k++) {
    atomic_init(&pair[k].head, 0);
    atomic_init(&pair[k].tail, 0);
    pair[k].count = total / pairs;
    pair[k].seed = o.seed + (uint64_t)k * 104729;
    if (pthread_create(&tid[2 * k], NULL, producer, &pair[k]) ||
        pthread_create(&tid[2 * k + 1], NULL, consumer, &pair[k]))
      wl_fail("pthread_create failed");
  }
  for (int k = 0; k < 2 * pairs; k++) pthread_join(tid[k], NULL);
  double work = wl_now() - t0;
  long yields = 0;
  for (int k = 0; k < pairs; k++) yields += pair[k].producer_yields + pair[k].consumer_yields;
  free(pair);
  wl_report(work, (double)(total / pairs) * pairs);
  printf("yields=%ld\n", yields);
  return 0;
}
