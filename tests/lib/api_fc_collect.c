/* api_fc_collect.c — tes_collect(true) (malloc_trim) from a thread gives
 * back what another thread freed of that thread's first-class heap, while
 * the heap lives on unused. The heap's pages emptied by remote frees wait on
 * their remote stacks (and the heap's delayed list, for pages that were
 * full) until an allocation from that heap looks at them; a collect reached
 * only the thread's default heap, so a heap the program keeps but stops
 * allocating from held them resident for good (200,000 blocks of 256 B:
 * about 52 MB after two collects; 2 MB once the heap was deleted). */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <stdint.h>

#define BLOCKS 200000
#define SIZE 256

static void *blocks[BLOCKS];

static void *freer(void *arg) {
  (void)arg;
  for (int i = 0; i < BLOCKS; i++) tes_free(blocks[i]);
  return NULL;
}

int main(void) {
  API_GROUP("a kept first-class heap's blocks freed by another thread, then a collect");
  tes_free(tes_malloc(1));
  tes_collect(true);
  int64_t start = api_rss_bytes();
  tes_heap_t *h = tes_heap_new();
  REQUIRE(h != NULL, "tes_heap_new");
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = tes_heap_malloc(h, SIZE);
    REQUIRE(blocks[i] != NULL, "tes_heap_malloc");
    memset(blocks[i], 0x5A, SIZE);
  }
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, freer, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  tes_collect(true);
  int64_t after = api_rss_bytes() - start;
  CHECK(after < (int64_t)8 << 20, "%lld KiB resident above the start after tes_collect(true) (51 MB of blocks freed)",
        (long long)(after >> 10));
  /* The heap still works. */
  void *p = tes_heap_malloc(h, SIZE);
  CHECK(p != NULL, "tes_heap_malloc after the collect");
  memset(p, 1, SIZE);
  tes_free(p);
  tes_heap_destroy(h);
  return api_finish("api_fc_collect");
}
