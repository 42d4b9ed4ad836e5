/* full_bin_budget.c — frees at a bin that hovers at its limit, for
 * tests/lib/slowpath_budget.sh (lib.full_bin_budget).
 *
 *   full_bin_budget [ROUNDS]
 *
 * Fills the 32-byte class's bin (5,000 frees: more than any bin holds,
 * heap.c's TES_BIN_GROWN_BLOCKS), then ROUNDS times (20,000): a malloc (a
 * pop: one block of room), the free of a block allocated before (a push:
 * the bin full again) and the free of the block just allocated, which
 * finds the bin full with one pop counted since the bin's last fold. The
 * 64-bit traces' interleavings (syn-struct, cbit-*) do this all the time
 * (PERFORMANCE.md, twenty-third session). Such a free goes to its page;
 * until then every one called tes_bin_room_out, which folded the pops and
 * found the bin full: 10% of the traces' frees. One thread, the same calls
 * every run; standard API only; built with -fno-builtin. */
#include <stdio.h>
#include <stdlib.h>

#define FILL 5000
#define MAX_ROUNDS 100000

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 20000;
  if (rounds < 1 || rounds > MAX_ROUNDS) return 2;
  static char *pool[MAX_ROUNDS];
  static char *fill[FILL];
  for (long i = 0; i < rounds; i++)
    if ((pool[i] = malloc(32)) == NULL) return 1;
  for (int i = 0; i < FILL; i++)
    if ((fill[i] = malloc(32)) == NULL) return 1;
  for (int i = 0; i < FILL; i++) free(fill[i]);
  unsigned long sum = 0;
  for (long i = 0; i < rounds; i++) {
    char *x = malloc(32);
    if (x == NULL) return 1;
    x[0] = (char)i;
    sum += (unsigned char)x[0];
    free(pool[i]);
    free(x);
  }
  printf("rounds=%ld check=%lu\n", rounds, sum);
  return 0;
}
