/* grow_budget.c — a large block grown one byte per realloc, measured in
 * instructions with callgrind (tests/lib/grow_budget.sh).
 *
 *   grow_budget grow|empty CALLS
 *
 * grow reallocs a 300,000-byte block to one byte more, CALLS times, and
 * writes its new last byte (a string built a character at a time, past the
 * 128 KiB where blocks are large); empty runs the same loop without the
 * realloc, to subtract. Nearly every call stays within the block's pages.
 * The loops live in run_* functions, which callgrind counts with
 * --toggle-collect=run_*. Standard API only, so it runs on any allocator
 * through LD_PRELOAD. Built with -fno-builtin. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define START 300000

__attribute__((noinline)) char *run_grow(char *p, long calls) {
  for (long i = 1; i <= calls; i++) {
    char *q = realloc(p, START + (size_t)i);
    if (q == NULL) return NULL;
    p = q;
    p[START + i - 1] = (char)i;
  }
  return p;
}

__attribute__((noinline)) char *run_empty(char *p, long calls) {
  for (long i = 1; i <= calls; i++) {
    __asm__ volatile("" : "+r"(p) : : "memory");
    p[START + i - 1] = (char)i;
  }
  return p;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s grow|empty CALLS\n", argv[0]);
    return 2;
  }
  long calls = strtol(argv[2], NULL, 10);
  if (calls <= 0 || calls > 1000000) {
    fprintf(stderr, "%s: CALLS must be in 1..1000000\n", argv[0]);
    return 2;
  }
  bool grow = !strcmp(argv[1], "grow");
  if (!grow && strcmp(argv[1], "empty")) {
    fprintf(stderr, "%s: unknown mode '%s'\n", argv[0], argv[1]);
    return 2;
  }
  /* The empty loop writes where the grown block would reach: allocate it
   * whole there, outside the measured function. */
  char *p = malloc(grow ? START : START + (size_t)calls);
  if (p == NULL) return 1;
  p = grow ? run_grow(p, calls) : run_empty(p, calls);
  if (p == NULL) {
    fprintf(stderr, "%s: realloc failed\n", argv[0]);
    return 1;
  }
  for (long i = 1; i <= calls; i++) {
    if (p[START + i - 1] != (char)i) {
      fprintf(stderr, "%s: byte %ld lost\n", argv[0], START + i - 1);
      return 1;
    }
  }
  free(p);
  return 0;
}
