/* refill_budget.c — a workload whose malloc misses are nearly all page
 * refills from the owner's own frees, for tests/lib/slowpath_budget.sh
 * (measuring tes_heap_malloc_miss).
 *
 *   refill_budget [ROUNDS]
 *
 * The shape of the suite's threads row on one thread: batches of 64
 * mallocs of 16-512 B, each block written, then 64 frees in the same order.
 * Nothing crosses threads, so every miss finds its page's free list empty
 * and its local_free full (hardened build, or the default one with
 * TESSERA_BINS=0: about one malloc in 30). A fixed xorshift sequence, one
 * thread: the same calls every run. Standard API only; built with
 * -fno-builtin. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BATCH 64

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
  if (rounds <= 0) {
    fprintf(stderr, "usage: %s [ROUNDS]\n", argv[0]);
    return 2;
  }
  static char *block[BATCH];
  uint64_t x = 88172645463325252u;
  for (long r = 0; r < rounds; r++) {
    for (unsigned i = 0; i < BATCH; i++) {
      size_t size = 16 + (size_t)(xorshift(&x) % 497);
      block[i] = malloc(size);
      if (block[i] == NULL) {
        fprintf(stderr, "%s: malloc(%zu) failed\n", argv[0], size);
        return 1;
      }
      block[i][0] = (char)i; /* touched, as a program would */
    }
    for (unsigned i = 0; i < BATCH; i++) {
      if (block[i][0] != (char)i) {
        fprintf(stderr, "%s: block %u overwritten\n", argv[0], i);
        return 1;
      }
      free(block[i]);
    }
  }
  return 0;
}
