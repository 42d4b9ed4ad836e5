/* fastpath.c — the allocator fast-path microbenchmark, measured in
 * instructions with callgrind (see fastpath.sh).
 *
 *   fastpath_bench MODE PAIRS
 *
 * MODE is one of
 *   pingpong        malloc(32) then free, PAIRS times
 *   lifo            random sizes 8..512 bytes, allocated in batches of 100
 *                   and freed in reverse (LIFO) order, PAIRS pairs in all
 *   usable          pingpong with a malloc_usable_size of the block between
 *                   (minus pingpong: the instructions of that call, which
 *                   programs that count their own bytes make on every
 *                   malloc and free, as redis's zmalloc does)
 *   pingpong-empty  the same loops with the allocator calls replaced by a
 *   lifo-empty      register move: the loop overhead to subtract
 * The measured loops live in the run_* functions, which callgrind counts
 * with --toggle-collect=run_*; everything else (start-up, the size table) is
 * outside. Standard malloc/free only: the program works with any allocator
 * through LD_PRELOAD. Built with -fno-builtin so no call is elided. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 100
#define SIZE_TABLE 4096 /* a multiple of BATCH is not needed; indices wrap */

static unsigned short sizes[SIZE_TABLE];

#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

__attribute__((noinline)) void run_pingpong(long pairs) {
  for (long i = 0; i < pairs; i++) {
    void *p = malloc(32);
    KEEP(p);
    free(p);
  }
}

__attribute__((noinline)) void run_usable(long pairs) {
  size_t total = 0;
  for (long i = 0; i < pairs; i++) {
    void *p = malloc(32);
    total += malloc_usable_size(p);
    KEEP(p);
    free(p);
  }
  KEEP(total);
}

__attribute__((noinline)) void run_pingpong_empty(long pairs) {
  for (long i = 0; i < pairs; i++) {
    void *p = (void *)(long)32;
    KEEP(p);
    KEEP(p);
  }
}

__attribute__((noinline)) void run_lifo(long pairs) {
  void *blocks[BATCH];
  unsigned k = 0;
  for (long done = 0; done < pairs; done += BATCH) {
    for (int i = 0; i < BATCH; i++) {
      blocks[i] = malloc(sizes[k++ & (SIZE_TABLE - 1)]);
      KEEP(blocks[i]);
    }
    for (int i = BATCH - 1; i >= 0; i--) free(blocks[i]);
  }
}

__attribute__((noinline)) void run_lifo_empty(long pairs) {
  void *blocks[BATCH];
  unsigned k = 0;
  for (long done = 0; done < pairs; done += BATCH) {
    for (int i = 0; i < BATCH; i++) {
      blocks[i] = (void *)(unsigned long)sizes[k++ & (SIZE_TABLE - 1)];
      KEEP(blocks[i]);
    }
    for (int i = BATCH - 1; i >= 0; i--) KEEP(blocks[i]);
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s pingpong|lifo|usable|pingpong-empty|lifo-empty PAIRS\n", argv[0]);
    return 2;
  }
  long pairs = strtol(argv[2], NULL, 10);
  if (pairs <= 0 || pairs % BATCH != 0) {
    fprintf(stderr, "%s: PAIRS must be a positive multiple of %d\n", argv[0], BATCH);
    return 2;
  }
  unsigned long x = 88172645463325252ul; /* xorshift: the same sizes every run */
  for (int i = 0; i < SIZE_TABLE; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    sizes[i] = (unsigned short)(8 + x % 505); /* 8..512 */
  }
  /* Warm up outside the measured functions: first-call set-up is not the fast path. */
  for (int i = 0; i < 1000; i++) free(malloc(sizes[i]));
  if (!strcmp(argv[1], "pingpong")) run_pingpong(pairs);
  else if (!strcmp(argv[1], "lifo")) run_lifo(pairs);
  else if (!strcmp(argv[1], "usable")) run_usable(pairs);
  else if (!strcmp(argv[1], "pingpong-empty")) run_pingpong_empty(pairs);
  else if (!strcmp(argv[1], "lifo-empty")) run_lifo_empty(pairs);
  else {
    fprintf(stderr, "%s: unknown mode '%s'\n", argv[0], argv[1]);
    return 2;
  }
  return 0;
}
