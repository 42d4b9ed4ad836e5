/* api_large_tail.c — a large block placed in a cached segment that held a
 * longer one leaves a dirty tail, purged one purge delay later while the
 * block lives (large.c, tail_list). Any thread may run that purge (a slow
 * path, a trim, the purge thread). Here one thread keeps taking such a
 * segment with a small block, growing it in place by realloc over the tail
 * and writing it, while another forces purges: a purge that used the
 * block's size from before the growth would give back pages the program
 * had just written (they read as zero). Bounded by TRIES and SECONDS. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <stdatomic.h>

enum { TRIES = 4000, SECONDS = 4 };
#define BIG ((size_t)3500 << 10)
#define SMALL ((size_t)600 << 10) /* maps 1 MiB: takes the 4 MiB cached segment (up to four times its mapping) */

static _Atomic int stop;
static _Atomic long lost_bytes, reused;

static void *purger(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) tes_collect(true); /* forces the tails' purge (and drops the cache) */
  return NULL;
}

int main(void) {
  API_GROUP("a pending tail purge never reaches into a block grown in place");
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 60000); /* the tails wait: only the forced purges take them */
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, purger, NULL) == 0, "pthread_create");
  double until = api_now_seconds() + SECONDS;
  for (int i = 0; i < TRIES && api_now_seconds() < until; i++) {
    unsigned char *big = malloc(BIG);
    REQUIRE(big != NULL, "malloc");
    memset(big, 1, BIG);
    free(big);
    unsigned char *p = malloc(SMALL); /* the big block's segment, when the purger left it cached */
    REQUIRE(p != NULL, "malloc");
    memset(p, 2, SMALL);
    unsigned char *g = realloc(p, BIG);
    REQUIRE(g != NULL, "realloc");
    if (g == big) atomic_fetch_add(&reused, 1);
    memset(g + SMALL, 3, BIG - SMALL);
    long wrong = 0;
    for (size_t k = 0; k < BIG; k += 512) wrong += g[k] != (k < SMALL ? 2 : 3);
    atomic_fetch_add(&lost_bytes, wrong);
    free(g);
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  CHECK(atomic_load(&lost_bytes) == 0, "%ld sampled bytes of grown blocks read back wrong", atomic_load(&lost_bytes));
  CHECK(atomic_load(&reused) > 0, "no try took the big block's cached segment again");
  printf("%ld tries grew a block in the big block's segment\n", atomic_load(&reused));
  return api_finish("api_large_tail");
}
