/* fit_cpe357.c — the CPE 357 allocator exercise pattern, repeated so it can be
 * timed: allocate 100 blocks of 1,000 bytes, free the first 90, free the
 * block in the middle of the remaining ten (index 95) and allocate it again,
 * then free the rest. Fragmentation is sampled in the last round right after
 * the re-allocation, when ten blocks are live at the top of the heap.
 */
#include "fit_bench.h"

#include <stdio.h>

#define BLOCKS 100
#define SIZE 1000

int main(int argc, char **argv) {
  static void *p[BLOCKS];
  fit_bench_t fb;
  fit_bench_init(&fb, "cpe357", 20000, argc, argv);

  fit_bench_start(&fb);
  for (long round = 0; round < fb.iters; round++) {
    for (int i = 0; i < BLOCKS; i++)
      if (!(p[i] = fb.alloc(SIZE))) return fprintf(stderr, "fit_cpe357: out of memory\n"), 1;
    for (int i = 0; i < 90; i++) fb.release(p[i]);
    fb.release(p[95]);
    if (!(p[95] = fb.alloc(SIZE))) return fprintf(stderr, "fit_cpe357: out of memory\n"), 1;
    if (round == fb.iters - 1) fit_bench_sample(&fb);
    for (int i = 90; i < BLOCKS; i++) fb.release(p[i]);
  }
  fit_bench_finish(&fb);
  return 0;
}
