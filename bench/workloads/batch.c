/* Workloads `batch-alloc` and `batch-free` (seed rows 2 and 3): rounds of
 * allocating a batch of 20,000 small blocks (16-256 B, fixed random
 * sequence), touching each, then freeing the whole batch in allocation order.
 * --mode alloc reports the time spent in the allocation phases as work_s,
 * --mode free the time in the free phases; both phases always run, so the
 * two rows see the same heap states. */
#include "wl_common.h"

#define BATCH 20000

int main(int argc, char **argv) {
  static const char *const modes[] = {"alloc", "free", NULL};
  wl_options_t o = wl_parse_ex(argc, argv,
                               "batch: allocate 20,000 blocks of 16-256 B, then free them all (--mode alloc|free)",
                               modes, 0);
  int measure_free = o.mode != NULL && !strcmp(o.mode, "free");

  long rounds = wl_scaled(&o, 400, 2);
  static size_t sizes[BATCH];
  static char *blocks[BATCH];
  uint64_t rng = o.seed;
  for (int i = 0; i < BATCH; i++) sizes[i] = wl_rand_range(&rng, 16, 256);

  double alloc_s = 0, free_s = 0;
  for (long r = 0; r < rounds; r++) {
    double t0 = wl_now();
    for (int i = 0; i < BATCH; i++) {
      blocks[i] = wl_check(malloc(sizes[i]), "malloc returned NULL");
      blocks[i][0] = (char)i;
    }
    double t1 = wl_now();
    for (int i = 0; i < BATCH; i++) free(blocks[i]);
    double t2 = wl_now();
    alloc_s += t1 - t0;
    free_s += t2 - t1;
  }
  printf("alloc_s=%.6f\nfree_s=%.6f\n", alloc_s, free_s);
  wl_report(measure_free ? free_s : alloc_s, (double)rounds * BATCH);
  return 0;
}
