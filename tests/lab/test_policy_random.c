/* test_policy_random: random malloc/free/realloc sequences on every
 * registered lab policy at alignment 8 and 16, with the policy's check()
 * after every operation, every payload filled with a pattern derived from
 * its slot and verified on free, on realloc (the kept prefix) and at the
 * end, and every new block checked against all live ones for overlap.
 * Each run is done twice: on a heap that stays narrow, and on one whose
 * wide region is opened a third of the way through by a 3 GiB block (beyond
 * the narrow block format; lab/heap_core.h), so the rest of the run mixes
 * narrow blocks (freed, realloc'ed, their free space reused) with wide ones.
 * The 3 GiB block is address space only (never filled).
 * Deterministic (fixed seeds), a few seconds in total. */
#include "memlib.h"
#include "policy.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SLOTS 300
#define OPS 3000

static uint64_t rng_state;
static uint64_t rng(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static unsigned char *ptr[SLOTS];
static size_t len[SLOTS];
static const lab_policy_t *pol;
static size_t align;
static int wide_mode;
static unsigned char *opener; /* the 3 GiB block of a wide run (not a slot) */
#define OPENER_SIZE ((size_t)3 << 30)

static unsigned char pattern(size_t slot, size_t i) {
  return (unsigned char)(slot * 131 + i * 7 + 1);
}

static void fill(size_t s) {
  for (size_t i = 0; i < len[s]; i++) ptr[s][i] = pattern(s, i);
}

static int verify(size_t s, size_t n, long op) {
  for (size_t i = 0; i < n; i++)
    if (ptr[s][i] != pattern(s, i)) {
      fprintf(stderr, "FAIL %s align %zu op %ld: slot %zu byte %zu overwritten\n", pol->name,
              align, op, s, i);
      return -1;
    }
  return 0;
}

static size_t random_size(void) {
  uint64_t r = rng() % 100;
  if (r < 45) return 1 + rng() % 64;    /* small */
  if (r < 85) return 65 + rng() % 1000; /* medium */
  return 1000 + rng() % 20000;          /* large */
}

static int accept(size_t s, long op) {
  unsigned char *p = ptr[s];
  if ((uintptr_t)p % align || p < (unsigned char *)mem_heap_lo() ||
      p + len[s] - 1 > (unsigned char *)mem_heap_hi()) {
    fprintf(stderr, "FAIL %s align %zu op %ld: block %p (%zu bytes) misaligned or outside\n",
            pol->name, align, op, (void *)p, len[s]);
    return -1;
  }
  for (size_t t = 0; t < SLOTS; t++)
    if (t != s && ptr[t] && p < ptr[t] + len[t] && ptr[t] < p + len[s]) {
      fprintf(stderr, "FAIL %s align %zu op %ld: new block overlaps slot %zu\n", pol->name,
              align, op, t);
      return -1;
    }
  if (opener && p < opener + OPENER_SIZE && opener < p + len[s]) {
    fprintf(stderr, "FAIL %s align %zu op %ld: new block overlaps the 3 GiB block\n", pol->name,
            align, op);
    return -1;
  }
  return 0;
}

static int run(uint64_t seed) {
  char err[256];
  rng_state = seed;
  memset(ptr, 0, sizeof ptr);
  memset(len, 0, sizeof len);
  mem_reset_brk();
  if (pol->init(align) != 0) {
    fprintf(stderr, "FAIL %s align %zu: init\n", pol->name, align);
    return -1;
  }
  opener = NULL;
  for (long op = 0; op < OPS; op++) {
    if (wide_mode && op == OPS / 3) {
      opener = pol->malloc(OPENER_SIZE);
      if (!opener) {
        fprintf(stderr, "FAIL %s align %zu op %ld: malloc(3 GiB) NULL\n", pol->name, align, op);
        return -1;
      }
    }
    size_t s = rng() % SLOTS;
    uint64_t what = rng() % 10;
    if (!ptr[s]) {
      len[s] = random_size();
      ptr[s] = pol->malloc(len[s]);
      if (!ptr[s]) {
        fprintf(stderr, "FAIL %s align %zu op %ld: malloc(%zu) NULL\n", pol->name, align, op,
                len[s]);
        return -1;
      }
      if (accept(s, op)) return -1;
      fill(s);
    } else if (what < 6) {
      if (verify(s, len[s], op)) return -1;
      pol->free(ptr[s]);
      ptr[s] = NULL;
      len[s] = 0;
    } else {
      size_t n = what < 8 ? len[s] + 1 + rng() % (len[s] + 64) : 1 + rng() % len[s];
      unsigned char *q = pol->realloc(ptr[s], n);
      if (!q) {
        fprintf(stderr, "FAIL %s align %zu op %ld: realloc(%zu) NULL\n", pol->name, align, op, n);
        return -1;
      }
      size_t keep = n < len[s] ? n : len[s];
      ptr[s] = q;
      if (verify(s, keep, op)) return -1;
      len[s] = n;
      if (accept(s, op)) return -1;
      fill(s);
    }
    if (pol->check(err, sizeof err) != 0) {
      fprintf(stderr, "FAIL %s align %zu op %ld: check: %s\n", pol->name, align, op, err);
      return -1;
    }
  }
  for (size_t s = 0; s < SLOTS; s++)
    if (ptr[s]) {
      if (verify(s, len[s], OPS)) return -1;
      pol->free(ptr[s]);
      ptr[s] = NULL;
    }
  pol->free(opener);
  opener = NULL;
  if (pol->check(err, sizeof err) != 0) {
    fprintf(stderr, "FAIL %s align %zu at the end: check: %s\n", pol->name, align, err);
    return -1;
  }
  return 0;
}

int main(void) {
  int failures = 0;
  size_t runs = 0;
  for (wide_mode = 0; wide_mode <= 1; wide_mode++) {
    /* The wide runs need address space for the 3 GiB block (MAP_NORESERVE). */
    if (mem_init_cap(wide_mode ? (size_t)16 << 30 : 0) != 0) {
      perror("mem_init_cap");
      return 1;
    }
    for (const lab_policy_t *const *p = lab_policies(); *p; p++) {
      pol = *p;
      for (align = 8; align <= 16; align *= 2)
        for (uint64_t seed = 1; seed <= (wide_mode ? 1u : 2u); seed++, runs++)
          if (run(seed * 0x9E3779B97F4A7C15ull + align) != 0) failures++;
    }
  }
  mem_deinit();
  if (failures) {
    fprintf(stderr, "%d failing run(s)\n", failures);
    return 1;
  }
  printf("random operations: %zu runs of %d ops (a third with a wide region) passed with the "
         "checker on\n", runs, OPS);
  return 0;
}
