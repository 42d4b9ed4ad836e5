/* batch_budget.c — rounds of allocating a batch of 20,000 small blocks and
 * freeing them all, for tests/lib/slowpath_budget.sh (lib.batch_budget).
 *
 *   batch_budget [ROUNDS]
 *
 * The shape of the suite's batch-alloc and batch-free rows
 * (bench/workloads/batch.c), fewer rounds: 20,000 blocks of 16-256 B (a
 * fixed xorshift sequence), each written, then freed in allocation order;
 * 30 rounds, 600,000 mallocs. A class holds about 1,250 blocks of a round.
 * Bins that grow past that (heap.c, bin_grow) hand a round's blocks back
 * from the bin, the one freed last first, and the pages see no traffic;
 * bins of at most 255 blocks took a round's first frees and its pages the
 * rest, which emptied, retired and were carved again: the slow path ran
 * at every page (PERFORMANCE.md, twenty-second session). One thread, the
 * same calls every run; standard API only; built with -fno-builtin. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BATCH 20000

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 30;
  static size_t sizes[BATCH];
  static char *blocks[BATCH];
  uint64_t x = 0x9e3779b97f4a7c15u;
  for (int i = 0; i < BATCH; i++) sizes[i] = 16 + (size_t)(xorshift(&x) % 241);
  unsigned long sum = 0;
  for (long r = 0; r < rounds; r++) {
    for (int i = 0; i < BATCH; i++) {
      blocks[i] = malloc(sizes[i]);
      if (blocks[i] == NULL) return 1;
      blocks[i][0] = (char)i;
    }
    for (int i = 0; i < BATCH; i++) {
      sum += (unsigned char)blocks[i][0];
      free(blocks[i]);
    }
  }
  printf("mallocs=%ld check=%lu\n", rounds * BATCH, sum);
  return 0;
}
