/* slowpath_budget.c — a workload whose mallocs often take the slow path
 * (tes_heap_malloc_generic), for tests/lib/slowpath_budget.sh.
 *
 *   slowpath_budget [ROUNDS]
 *
 * The shape of the suite's fit-large row, smaller: a pool of 1,024 blocks
 * of 32 B to 64 KiB; each round frees 50 random ones and mallocs 50 new
 * random sizes. With few blocks of each class, a class's head page runs
 * out again and again, goes to the full queue, and comes back at the next
 * free into it; medium bins (2 to 64 blocks) overflow. Of the 195,349
 * mallocs (200,000 draws, less the slots drawn twice in a batch), about
 * 48,500 take the slow path in the hardened build and 8,000 in the default
 * one (13,459 before its bins grew, heap.c's bin_grow). A fixed xorshift
 * sequence, one thread: the
 * same calls every run. Standard API only (any allocator through
 * LD_PRELOAD); built with -fno-builtin. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 1024
#define BATCH 50
#define GRAIN 32   /* sizes GRAIN x U[1, 2048]: 32 B to 64 KiB, as fit-large */

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 4000;
  if (rounds <= 0) {
    fprintf(stderr, "usage: %s [ROUNDS]\n", argv[0]);
    return 2;
  }
  static char *slot[SLOTS];
  static unsigned batch[BATCH];
  uint64_t x = 88172645463325252u;
  for (long r = 0; r < rounds; r++) {
    /* BATCH random slots freed, then refilled with new random sizes. */
    for (unsigned b = 0; b < BATCH; b++) {
      batch[b] = (unsigned)(xorshift(&x) % SLOTS);
      free(slot[batch[b]]);
      slot[batch[b]] = NULL;
    }
    for (unsigned b = 0; b < BATCH; b++) {
      if (slot[batch[b]] != NULL) continue; /* drawn twice in this batch */
      size_t size = GRAIN * (1 + (size_t)(xorshift(&x) % 2048));
      slot[batch[b]] = malloc(size);
      if (slot[batch[b]] == NULL) {
        fprintf(stderr, "%s: malloc(%zu) failed\n", argv[0], size);
        return 1;
      }
      slot[batch[b]][0] = (char)r; /* touched, as a program would */
    }
  }
  for (unsigned k = 0; k < SLOTS; k++) free(slot[k]);
  return 0;
}
