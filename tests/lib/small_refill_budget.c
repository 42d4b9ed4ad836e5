/* small_refill_budget.c — the suite's fit-small row in small, for
 * tests/lib/slowpath_budget.sh (measuring tes_heap_malloc_miss and how
 * often malloc reaches it).
 *
 * As bench/fit/fit_random.c's small-range workload: 10,000 blocks of
 * 32 x U[4, 16] bytes (128-512 B: nine classes of the hardened build, 2 to
 * 8 pages each), freed 50 at a time in a shuffled order, each 50 frees
 * followed by 50 mallocs of the other set's sizes; 10 passes (fit-small
 * makes 100). The frees land all over each class's pages, so in the
 * hardened build (no bins for small classes) the page a class allocates
 * from runs dry holding a free or two of its own while the pages behind
 * it hold many. A fixed xorshift sequence, one thread: the same calls
 * every run. Standard API only; built with -fno-builtin. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ITEMS 10000
#define STEP 50
#define PASSES 10

static uint64_t state = 88172645463325252u;

static unsigned draw(unsigned bound) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (unsigned)(state % bound);
}

static size_t sizes[2][ITEMS];
static char *blocks[2][ITEMS];
static unsigned order[ITEMS];

static int take(unsigned set, unsigned i) {
  blocks[set][i] = malloc(sizes[set][i]);
  if (blocks[set][i] == NULL) {
    fprintf(stderr, "small_refill_budget: malloc(%zu) failed\n", sizes[set][i]);
    return 1;
  }
  blocks[set][i][0] = (char)i; /* touched, as a program would */
  return 0;
}

int main(void) {
  for (unsigned i = 0; i < ITEMS; i++) {
    sizes[0][i] = 32 * (4 + (size_t)draw(13));
    sizes[1][i] = 32 * (4 + (size_t)draw(13));
    order[i] = i;
  }
  for (unsigned i = ITEMS - 1; i > 0; i--) { /* Fisher-Yates */
    unsigned j = draw(i + 1), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (unsigned i = 0; i < ITEMS; i++)
    if (take(0, i)) return 1;
  for (unsigned pass = 0; pass < PASSES; pass++) {
    unsigned set = pass % 2;
    for (unsigned j = 0; j < ITEMS; j += STEP) {
      for (unsigned k = 0; k < STEP; k++) free(blocks[set][order[j + k]]);
      for (unsigned k = 0; k < STEP; k++)
        if (take(1 - set, j + k)) return 1;
    }
  }
  for (unsigned i = 0; i < ITEMS; i++) free(blocks[PASSES % 2][i]);
  return 0;
}
