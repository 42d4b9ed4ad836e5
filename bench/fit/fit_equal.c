/* fit_equal.c — the assignment's "equal size allocations" workload.
 *
 * 10,000 blocks of 128 bytes interleaved with 10,000 spacer blocks; the
 * blocks are freed (leaving 10,000 equal holes between live spacers), then
 * each iteration allocates 1,000, then walks the array allocating one and
 * freeing the one 1,000 earlier, then frees the last 1,000. Fragmentation is
 * sampled halfway through (iteration iters/2, item 5,000). The clock covers
 * the iterations only, as in the assignment.
 */
#include "fit_bench.h"

#include <stdio.h>

#define NUM_ITEMS 10000
#define ALLOC_SIZE 128

int main(int argc, char **argv) {
  static int *array[NUM_ITEMS], *spacers[NUM_ITEMS];
  fit_bench_t fb;
  fit_bench_init(&fb, "equal", 10000, argc, argv);

  for (int i = 0; i < NUM_ITEMS; i++) {
    array[i] = fb.alloc(ALLOC_SIZE);
    spacers[i] = fb.alloc(ALLOC_SIZE);
    if (!array[i] || !spacers[i]) return fprintf(stderr, "fit_equal: out of memory\n"), 1;
  }
  for (int i = 0; i < NUM_ITEMS; i++) fb.release(array[i]);

  fit_bench_start(&fb);
  for (long it = 0; it < fb.iters; it++) {
    for (int j = 0; j < 1000; j++) array[j] = fb.alloc(ALLOC_SIZE);
    for (int j = 1000; j < NUM_ITEMS; j++) {
      array[j] = fb.alloc(ALLOC_SIZE);
      fb.release(array[j - 1000]);
      if (it == fb.iters / 2 && j == NUM_ITEMS / 2) fit_bench_sample(&fb);
    }
    for (int j = NUM_ITEMS - 1000; j < NUM_ITEMS; j++) fb.release(array[j]);
  }
  fit_bench_finish(&fb);

  for (int i = 0; i < NUM_ITEMS; i++) fb.release(spacers[i]);
  return 0;
}
