/* fit_random.c — body of the small-range and large-range random workloads
 * (see fit_random.h).
 */
#include "fit_random.h"

#include "fit_bench.h"

#include <stdio.h>
#include <stdlib.h>

#define NUM_ITEMS 10000

typedef struct {
  size_t bytes;
  void *address;
} fit_item_t;

static fit_item_t items[2][NUM_ITEMS];
static unsigned free_order[NUM_ITEMS];

int fit_random_workload(const char *name, unsigned min_chunks, unsigned max_chunks, long default_iters,
                        int argc, char **argv) {
  const unsigned chunk = 32;
  fit_bench_t fb;
  fit_bench_init(&fb, name, default_iters, argc, argv);

  srand(fb.seed);
  for (int i = 0; i < NUM_ITEMS; i++) {
    items[0][i].bytes = ((unsigned)rand() % (max_chunks - min_chunks + 1) + min_chunks) * chunk;
    items[1][i].bytes = ((unsigned)rand() % (max_chunks - min_chunks + 1) + min_chunks) * chunk;
    free_order[i] = (unsigned)i;
  }
  for (int i = NUM_ITEMS - 1; i > 0; i--) { /* Fisher-Yates, as the assignment */
    int j = rand() % i;
    unsigned t = free_order[i];
    free_order[i] = free_order[j];
    free_order[j] = t;
  }
  for (int i = 0; i < NUM_ITEMS; i++)
    if (!(items[0][i].address = fb.alloc(items[0][i].bytes)))
      return fprintf(stderr, "%s: out of memory\n", name), 1;

  fit_bench_start(&fb);
  for (long it = 0; it < fb.iters; it++) {
    unsigned set = (unsigned)(it % 2);
    for (int j = 0; j < NUM_ITEMS; j += 50) {
      for (int k = 0; k < 50; k++) fb.release(items[set][free_order[j + k]].address);
      for (int k = 0; k < 50; k++)
        if (!(items[1 - set][j + k].address = fb.alloc(items[1 - set][j + k].bytes)))
          return fprintf(stderr, "%s: out of memory\n", name), 1;
    }
  }
  fit_bench_finish(&fb);

  unsigned last = (unsigned)(fb.iters % 2);
  for (int i = 0; i < NUM_ITEMS; i++) fb.release(items[last][i].address);
  return 0;
}
