/* large_churn.c — the memory programs of the large-block RSS tables
 * (docs/PERFORMANCE.md, "Dirty tails of reused large segments"): 50 live
 * blocks replaced in turn, random sizes from 1,000 B to MAX_MIB MiB, one
 * byte written per 4 KiB page, so every page a block reaches is resident.
 *
 *   large_churn MAX_MIB ITERATIONS ALIGNED
 *
 * ALIGNED 1 asks posix_memalign for 64 KiB-2 MiB alignments. Standard
 * calls only: run under LD_PRELOAD and /usr/bin/time -f '%M KB %S sys %R
 * faults'. The sizes are the same every run (xorshift). */
#include <stdio.h>
#include <stdlib.h>

#define LIVE 50

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MAX_MIB ITERATIONS ALIGNED\n", argv[0]);
    return 2;
  }
  size_t max = strtoul(argv[1], NULL, 10) << 20;
  long iterations = atol(argv[2]);
  int aligned = atoi(argv[3]);
  if (max <= 1000 || iterations <= 0) {
    fprintf(stderr, "%s: bad MAX_MIB or ITERATIONS\n", argv[0]);
    return 2;
  }
  void *live[LIVE] = {0};
  unsigned long x = 88172645463325252ul;
  for (long i = 0; i < iterations; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t size = 1000 + x % (max - 1000);
    int slot = (int)(i % LIVE);
    free(live[slot]);
    if (aligned) {
      size_t alignment = (size_t)64 << 10 << ((x >> 40) % 6);
      if (posix_memalign(&live[slot], alignment, size) != 0) return 1;
    } else if ((live[slot] = malloc(size)) == NULL) {
      return 1;
    }
    char *p = live[slot];
    for (size_t at = 0; at < size; at += 4096) p[at] = 1;
  }
  for (int i = 0; i < LIVE; i++) free(live[i]);
  return 0;
}
