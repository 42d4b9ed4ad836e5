/* Workload `mstress`: many threads with random object lifetimes and object
 * migration, in the style of mimalloc-bench's mstress. All threads share one
 * table of slots; each step a thread swaps a fresh block (mostly 16-256 B,
 * 1 in 100 up to 64 KiB) into a random slot and frees whatever it took out,
 * so blocks are freed by whichever thread comes next — usually not their
 * allocator. Every block carries its size and a check word that is verified
 * before the free. Some threads exit early and are replaced (thread churn). */
#include "wl_common.h"

#include <pthread.h>
#include <stdatomic.h>

#define TABLE 4096

typedef struct header_s {
  size_t size;
  uint64_t check;
} header_t;

static _Atomic(header_t *) table[TABLE];

/* A line of its own per thread: the loop writes `rng` at every step (the
 * calls to malloc and free keep it in memory), and 16-byte entries put two
 * or more threads' words on one line of main's stack array: false sharing
 * that cost every allocator 35-45% of the 4- and 8-thread rows' time and
 * made the 2-thread row bimodal by the stack's random alignment (mst28,
 * docs/PERFORMANCE.md). */
typedef struct stresser_s {
  _Alignas(64) long steps;
  uint64_t rng;
} stresser_t;
_Static_assert(sizeof(stresser_t) % 64 == 0 && _Alignof(stresser_t) == 64, "each thread's state on its own line");

static uint64_t check_word(const header_t *h) {
  return ((uint64_t)(uintptr_t)h * 0x9E3779B97F4A7C15ULL) ^ h->size;
}

static void release(header_t *h) {
  if (!h) return;
  if (h->check != check_word(h) || ((unsigned char *)h)[h->size - 1] != (unsigned char)h->size)
    wl_fail("block header or tail overwritten");
  free(h);
}

static void *stresser(void *arg) {
  stresser_t *s = arg;
  for (long i = 0; i < s->steps; i++) {
    size_t size = (wl_rand(&s->rng) % 100 == 0) ? wl_rand_range(&s->rng, 257, 65536)
                                                 : wl_rand_range(&s->rng, 16, 256);
    if (size < sizeof(header_t) + 1) size = sizeof(header_t) + 1;
    header_t *h = wl_check(malloc(size), "malloc returned NULL");
    h->size = size;
    h->check = check_word(h);
    ((unsigned char *)h)[size - 1] = (unsigned char)size;
    size_t slot = (size_t)(wl_rand(&s->rng) % TABLE);
    release(atomic_exchange(&table[slot], h));
    /* Random lifetimes: sometimes also empty another slot outright. */
    if (wl_rand(&s->rng) % 4 == 0)
      release(atomic_exchange(&table[(size_t)(wl_rand(&s->rng) % TABLE)], NULL));
  }
  return NULL;
}

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "mstress: threads swap blocks through a shared table (random lifetimes, migration, churn)");
  long total = wl_scaled(&o, 3000000L, 1000);
  const int generations = 10;
  pthread_t tid[1024];
  stresser_t st[1024];
  double t0 = wl_now();
  for (int g = 0; g < generations; g++) {
    for (int t = 0; t < o.threads; t++) {
      st[t].steps = total / o.threads / generations;
      st[t].rng = o.seed + (uint64_t)(g * 1024 + t + 1) * 65537;
      if (pthread_create(&tid[t], NULL, stresser, &st[t])) wl_fail("pthread_create failed");
    }
    for (int t = 0; t < o.threads; t++) pthread_join(tid[t], NULL);
  }
  for (int i = 0; i < TABLE; i++) release(atomic_exchange(&table[i], NULL));
  wl_report(wl_now() - t0, (double)(total / o.threads / generations) * generations * o.threads);
  return 0;
}
