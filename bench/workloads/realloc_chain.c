/* Workload `realloc` (seed row 5): four strings grow side by side by
 * realloc, 8-64 B at a time, from empty to 64 KiB, like a program appending to
 * buffers; the interleaving means a block's neighbour is often live, so
 * in-place growth is not free. Contents are checked after every move. */
#include "wl_common.h"

#define CHAINS 4
#define LIMIT (64 * 1024)

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "realloc: 4 interleaved buffers grown by realloc in 8-64 B steps to 64 KiB");
  long rounds = wl_scaled(&o, 1000, 2);
  uint64_t rng = o.seed;
  long reallocs = 0;
  double t0 = wl_now();
  for (long r = 0; r < rounds; r++) {
    unsigned char *buf[CHAINS] = {0};
    size_t len[CHAINS] = {0};
    int growing = CHAINS;
    while (growing) {
      growing = 0;
      for (int c = 0; c < CHAINS; c++) {
        if (len[c] >= LIMIT) continue;
        growing++;
        size_t add = wl_rand_range(&rng, 8, 64);
        unsigned char *p = wl_check(realloc(buf[c], len[c] + add), "realloc returned NULL");
        if (len[c] && (p[0] != (unsigned char)c || p[len[c] - 1] != (unsigned char)(len[c] - 1)))
          wl_fail("realloc lost the old contents");
        p[0] = (unsigned char)c;
        for (size_t k = len[c] > 0 ? len[c] : 1; k < len[c] + add; k++) p[k] = (unsigned char)k;
        buf[c] = p;
        len[c] += add;
        reallocs++;
      }
    }
    for (int c = 0; c < CHAINS; c++) free(buf[c]);
  }
  wl_report(wl_now() - t0, (double)reallocs);
  return 0;
}
