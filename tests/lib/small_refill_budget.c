/* small_refill_budget.c — the suite's fit-small row in small, for
 * tests/lib/slowpath_budget.sh (measuring tes_heap_malloc_miss and how
 * often malloc reaches it).
 *
 *   small_refill_budget [ROUNDS]
 *
 * A pool of 10,000 blocks of 32 x U[4, 16] bytes (128-512 B: nine classes
 * of the hardened build, 2 to 8 pages each), as fit-small's; each round
 * frees 50 random ones and mallocs 50 new random sizes. The frees land all over each
 * class's pages, so in the hardened build (no bins for small classes) the
 * page a class allocates from runs dry holding a free or two of its own
 * while the pages behind it hold many. A fixed xorshift sequence, one
 * thread: the same calls every run. Standard API only; built with
 * -fno-builtin. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 10000
#define BATCH 50

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static size_t random_size(uint64_t *x) { return 32 * (4 + (size_t)(xorshift(x) % 13)); }

int main(int argc, char **argv) {
  long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
  if (rounds <= 0) {
    fprintf(stderr, "usage: %s [ROUNDS]\n", argv[0]);
    return 2;
  }
  static char *slot[SLOTS];
  static unsigned batch[BATCH];
  uint64_t x = 88172645463325252u;
  for (unsigned i = 0; i < SLOTS; i++)
    if ((slot[i] = malloc(random_size(&x))) == NULL) return fprintf(stderr, "%s: out of memory\n", argv[0]), 1;
  for (long r = 0; r < rounds; r++) {
    for (unsigned b = 0; b < BATCH; b++) {
      batch[b] = (unsigned)(xorshift(&x) % SLOTS);
      free(slot[batch[b]]);
      slot[batch[b]] = NULL;
    }
    for (unsigned b = 0; b < BATCH; b++) {
      if (slot[batch[b]] != NULL) continue; /* drawn twice in this batch */
      size_t size = random_size(&x);
      if ((slot[batch[b]] = malloc(size)) == NULL) {
        fprintf(stderr, "%s: malloc(%zu) failed\n", argv[0], size);
        return 1;
      }
      slot[batch[b]][0] = (char)b; /* touched, as a program would */
    }
  }
  for (unsigned i = 0; i < SLOTS; i++) free(slot[i]);
  return 0;
}
