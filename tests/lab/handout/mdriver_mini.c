/* A small mdriver-like grader for the handout test: it only knows mm.h and
 * memlib.h, like the real handout driver. Three "traces" of deterministic
 * random operations, each after mem_reset_brk() + mm_init(), checking
 * alignment, heap bounds, overlap with every live block and contents; a
 * request beyond the 20 MB heap must return NULL and leave the heap usable;
 * mm_check() (from the adapter) must pass throughout. Exit 0 when all is
 * well. */
#include "memlib.h"
#include "mm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef ALIGNMENT
#define ALIGNMENT 8
#endif
#define SLOTS 200
#define OPS 5000

extern int mm_check(void);

static unsigned char *ptr[SLOTS];
static size_t len[SLOTS];
static uint32_t seed;

static uint32_t next_random(void) {
  seed = seed * 1103515245u + 12345u;
  return seed >> 8;
}

static unsigned char byte_for(size_t slot, size_t i) { return (unsigned char)(slot * 17 + i); }

static int fail(int pass, int op, const char *what) {
  fprintf(stderr, "mdriver_mini: pass %d op %d: %s\n", pass, op, what);
  return 1;
}

static int valid_block(int pass, int op, size_t s) {
  unsigned char *p = ptr[s];
  if ((uintptr_t)p % ALIGNMENT) return fail(pass, op, "payload not aligned");
  if (p < (unsigned char *)mem_heap_lo() || p + len[s] - 1 > (unsigned char *)mem_heap_hi())
    return fail(pass, op, "payload outside the heap");
  for (size_t t = 0; t < SLOTS; t++)
    if (t != s && ptr[t] && p < ptr[t] + len[t] && ptr[t] < p + len[s])
      return fail(pass, op, "payload overlaps another block");
  return 0;
}

static int same(size_t s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (ptr[s][i] != byte_for(s, i)) return 0;
  return 1;
}

static void fill(size_t s) {
  for (size_t i = 0; i < len[s]; i++) ptr[s][i] = byte_for(s, i);
}

int main(void) {
  mem_init();
  for (int pass = 0; pass < 3; pass++) {
    memset(ptr, 0, sizeof ptr);
    memset(len, 0, sizeof len);
    seed = 12345u + (uint32_t)pass;
    mem_reset_brk();
    if (mm_init() < 0) return fail(pass, 0, "mm_init failed");
    for (int op = 0; op < OPS; op++) {
      size_t s = next_random() % SLOTS;
      uint32_t r = next_random();
      if (!ptr[s]) {
        len[s] = r % 4 ? 1 + next_random() % 128 : 1 + next_random() % 8000;
        ptr[s] = mm_malloc(len[s]);
        if (!ptr[s]) return fail(pass, op, "mm_malloc returned NULL");
        if (valid_block(pass, op, s)) return 1;
        fill(s);
      } else if (r % 3) {
        if (!same(s, len[s])) return fail(pass, op, "payload changed while allocated");
        mm_free(ptr[s]);
        ptr[s] = NULL;
      } else {
        size_t n = 1 + next_random() % (2 * len[s] + 64);
        unsigned char *q = mm_realloc(ptr[s], n);
        if (!q) return fail(pass, op, "mm_realloc returned NULL");
        ptr[s] = q;
        if (!same(s, n < len[s] ? n : len[s])) return fail(pass, op, "mm_realloc lost data");
        len[s] = n;
        if (valid_block(pass, op, s)) return 1;
        fill(s);
      }
      if (op % 100 == 0 && mm_check() != 0) return fail(pass, op, "mm_check failed");
    }
    /* Beyond the 20 MB heap: NULL, and the heap stays consistent and usable. */
    if (mm_malloc(30u << 20) != NULL) return fail(pass, OPS, "30 MB from a 20 MB heap");
    if (mm_check() != 0) return fail(pass, OPS, "mm_check failed after exhaustion");
    void *small = mm_malloc(100);
    if (!small) return fail(pass, OPS, "no allocation after a refused one");
    mm_free(small);
    for (size_t s = 0; s < SLOTS; s++)
      if (ptr[s]) {
        if (!same(s, len[s])) return fail(pass, OPS, "payload changed while allocated");
        mm_free(ptr[s]);
      }
    if (mm_check() != 0) return fail(pass, OPS, "mm_check failed at the end");
    printf("pass %d: %d ops, heap %zu bytes\n", pass, OPS, mem_heapsize());
  }
  printf("team %s: all passes valid\n", team.teamname);
  mem_deinit();
  return 0;
}
