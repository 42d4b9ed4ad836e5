/* list_grow_faults.c — arrays grown by realloc as CPython grows a list
 * (n + n/8 + 6 items, rounded down to 4), past the medium classes into
 * large blocks, then freed; round after round (security.*_list_grow_faults).
 *
 *   list_grow_faults ROUNDS ITEMS [MAX_FAULTS]
 *
 * Two arrays of ITEMS pointers grow interleaved (as a program's lists do),
 * each new item written; at the end of a round both are freed. Prints the
 * minor page faults of each round and of the last half of the rounds; with
 * MAX_FAULTS it fails (exit 1) when that sum is above it. The arrays of a
 * round fit in what the rounds before left mapped, so an allocator that
 * hands them memory it already holds faults nothing after the first rounds
 * (the default build: 0 a round from the fourth). The hardened build put an
 * array's first large block at the end of a segment (its guard page there)
 * and grew its segment by mremap at the next realloc, so every round wrote
 * fresh pages: 150-180 faults a round of 176 pages written (twenty-fifth
 * session, hsm25; CPython's bench_python faulted 4,000 pages more than the
 * default build so). Run with TESSERA_PURGE_DELAY_MS=3600000, so that no
 * purge on a clock runs: the count is then the allocator's layout alone,
 * not a timing. Standard names only: run with the library under test
 * preloaded (exit 3 when no libtessera is loaded, so a broken preload
 * cannot pass). Built with -fno-builtin. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static long minor_faults(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

/* CPython's list_resize: the capacity for n items. */
static long list_capacity(long n) { return (n + (n >> 3) + 6) & ~3L; }

static int append(void ***items, long *capacity, long n) {
  if (n >= *capacity) {
    long want = list_capacity(n + 1);
    void **grown = realloc(*items, (size_t)want * sizeof **items);
    if (grown == NULL) return 1;
    *items = grown;
    *capacity = want;
  }
  (*items)[n] = (void *)(uintptr_t)(n + 1);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s ROUNDS ITEMS [MAX_FAULTS]\n", argv[0]);
    return 2;
  }
  if (dlsym(RTLD_DEFAULT, "tes_malloc") == NULL) {
    fprintf(stderr, "libtessera is not loaded\n");
    return 3;
  }
  int rounds = atoi(argv[1]);
  long count = atol(argv[2]);
  long max_faults = argc == 4 ? atol(argv[3]) : -1;
  long late = 0;
  for (int r = 0; r < rounds; r++) {
    long before = minor_faults();
    void **a = NULL, **b = NULL;
    long a_capacity = 0, b_capacity = 0;
    for (long n = 0; n < count; n++)
      if (append(&a, &a_capacity, n) || append(&b, &b_capacity, n)) {
        printf("out of memory\n");
        return 1;
      }
    for (long n = 0; n < count; n++)
      if (a[n] != (void *)(uintptr_t)(n + 1) || b[n] != (void *)(uintptr_t)(n + 1)) {
        printf("item %ld lost\n", n);
        return 1;
      }
    free(a);
    free(b);
    long faults = minor_faults() - before;
    printf("round %d: %ld faults\n", r, faults);
    if (r >= rounds / 2) late += faults;
  }
  printf("last %d rounds: %ld faults\n", rounds - rounds / 2, late);
  if (max_faults >= 0 && late > max_faults) {
    printf("more than %ld: the arrays were given fresh pages round after round\n", max_faults);
    return 1;
  }
  printf("within the bound\n");
  return 0;
}
