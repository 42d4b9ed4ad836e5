/* Workload `single` (seed row 1): one malloc and its free, back to back, in a
 * tight loop — the allocator's fast path and nothing else. Sizes cycle
 * through eight small classes so a one-size cache cannot hide the size-class
 * lookup. Measures malloc+free pairs per second. */
#include "wl_common.h"

static const size_t sizes[8] = {16, 24, 32, 48, 64, 96, 128, 256};

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "single: malloc+free of one small block in a tight loop");
  long pairs = wl_scaled(&o, 40000000L, 1000);
  double t0 = wl_now();
  for (long i = 0; i < pairs; i++) {
    char *p = wl_check(malloc(sizes[i & 7]), "malloc returned NULL");
    /* A store the compiler cannot drop keeps malloc/free from being elided. */
    *(volatile char *)p = (char)i;
    free(p);
  }
  wl_report(wl_now() - t0, (double)pairs);
  return 0;
}
