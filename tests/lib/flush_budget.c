/* flush_budget.c — the bins' flush, for tests/lib/slowpath_budget.sh
 * (lib.flush_budget: instructions per call of heap.c's bins_flush).
 *
 *   flush_budget [ROUNDS]
 *
 * One block of each of eight classes (16 B to 40 KiB) stays allocated for
 * the whole run, so their pages never empty; then ROUNDS times (1,000):
 * four blocks of each of those classes allocated and freed (into their
 * bins), and malloc_trim(0), whose collect flushes the bins: 32 blocks go
 * back to pages that stay in use, the other 56 bins are empty. A flush
 * once per purge delay on a slow path (and at collect, trim, detach and
 * exit) looks like this: a few bins hold blocks, most hold none. One
 * thread, the same calls every run; standard API (and glibc's
 * malloc_trim) only; built with -fno-builtin. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#define CLASSES 8
#define EACH 4

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 1000;
  if (rounds < 1 || rounds > 1000000) return 2;
  static const size_t sizes[CLASSES] = {16, 48, 200, 640, 1500, 4000, 9000, 40000};
  void *anchor[CLASSES], *p[CLASSES][EACH];
  for (int c = 0; c < CLASSES; c++)
    if ((anchor[c] = malloc(sizes[c])) == NULL) return 1;
  unsigned long sum = 0;
  for (long r = 0; r < rounds; r++) {
    for (int c = 0; c < CLASSES; c++)
      for (int i = 0; i < EACH; i++) {
        if ((p[c][i] = malloc(sizes[c])) == NULL) return 1;
        *(char *)p[c][i] = (char)r;
        sum += (unsigned char)*(char *)p[c][i];
      }
    for (int c = 0; c < CLASSES; c++)
      for (int i = 0; i < EACH; i++) free(p[c][i]);
    malloc_trim(0);
  }
  for (int c = 0; c < CLASSES; c++) free(anchor[c]);
  printf("rounds=%ld check=%lu\n", rounds, sum);
  return 0;
}
