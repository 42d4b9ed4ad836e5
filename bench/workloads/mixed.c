/* Workload `mixed` (seed row 4): a pool of 400 live blocks whose sizes are
 * drawn log-uniformly from 8 B to 1 MiB; each step frees a random slot and
 * refills it with a new size. Small, medium and large paths all get
 * exercised, with realistic churn. The first and last byte of each block are
 * written and checked, so a block handed out twice is caught. */
#include "wl_common.h"

#define SLOTS 400

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "mixed: random replace in a 400-slot pool, sizes 8 B-1 MiB log-uniform");
  long steps = wl_scaled(&o, 1500000L, 1000);
  static unsigned char *slot[SLOTS];
  static size_t slot_size[SLOTS];
  uint64_t rng = o.seed;
  double t0 = wl_now();
  for (long s = 0; s < steps; s++) {
    size_t i = (size_t)(wl_rand(&rng) % SLOTS);
    if (slot[i]) {
      unsigned char tag = (unsigned char)i;
      if (slot[i][0] != tag || slot[i][slot_size[i] - 1] != tag) wl_fail("block contents overwritten");
      free(slot[i]);
    }
    size_t size = wl_rand_log(&rng, 8, 1u << 20);
    slot[i] = wl_check(malloc(size), "malloc returned NULL");
    slot_size[i] = size;
    slot[i][0] = slot[i][size - 1] = (unsigned char)i;
  }
  for (int i = 0; i < SLOTS; i++) free(slot[i]);
  wl_report(wl_now() - t0, (double)steps);
  return 0;
}
