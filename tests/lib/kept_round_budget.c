/* kept_round_budget.c — the suite's cpe357 row in small, for
 * tests/lib/slowpath_budget.sh (measuring tes_heap_malloc_miss and how
 * often malloc reaches it).
 *
 * As bench/fit/fit_cpe357.c: each round allocates 100 blocks of 1,000 B
 * (two pages of the hardened build's class, 64 and 36 blocks), frees the
 * first 90, frees and allocates the 96th again, then frees the last 10;
 * 2,000 rounds (the row makes 20,000). Every round empties the page that
 * is not its class's head. One thread, the same calls every run. Standard
 * API only; built with -fno-builtin. */
#include <stdio.h>
#include <stdlib.h>

#define BLOCKS 100
#define SIZE 1000
#define ROUNDS 2000

static char *p[BLOCKS];

static int take(int i) {
  p[i] = malloc(SIZE);
  if (p[i] == NULL) {
    fprintf(stderr, "kept_round_budget: malloc(%d) failed\n", SIZE);
    return 1;
  }
  p[i][0] = (char)i; /* touched, as a program would */
  return 0;
}

int main(void) {
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < BLOCKS; i++)
      if (take(i)) return 1;
    for (int i = 0; i < 90; i++) free(p[i]);
    free(p[95]);
    if (take(95)) return 1;
    for (int i = 90; i < BLOCKS; i++) free(p[i]);
  }
  return 0;
}
