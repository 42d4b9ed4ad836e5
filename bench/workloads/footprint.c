/* Workload `footprint`: a long-running program whose size mix shifts, to see
 * whether memory goes back to the OS (PITFALLS #1, #2). Phases:
 *   1 small   fill 48 MiB with 16-128 B blocks, then free 90% at random;
 *   2 medium  with those survivors pinned, fill 48 MiB of 1-16 KiB blocks,
 *             then free them all;
 *   3 large   cycle 64 KiB-1 MiB blocks with 32 MiB live, then free them;
 *   4 idle    free everything and sleep, giving purging a chance;
 *   5 small   refill 24 MiB of small blocks (is memory reused?).
 * The runner samples VmRSS during the run (the RSS-over-time chart); this
 * program prints `phase_N_rss_kib=` at the end of each phase as well. */
#include "wl_common.h"

#include <unistd.h>

#define MIB (1024L * 1024L)

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages_total = 0, pages_resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
    fclose(f);
  }
  return pages_resident * (sysconf(_SC_PAGESIZE) / 1024);
}

typedef struct pool_s {
  char **block;
  long count, cap;
} pool_t;

static void pool_push(pool_t *p, char *b) {
  if (p->count == p->cap) {
    p->cap = p->cap ? p->cap * 2 : 4096;
    p->block = wl_check(realloc(p->block, (size_t)p->cap * sizeof(char *)), "realloc returned NULL");
  }
  p->block[p->count++] = b;
}

static void pool_fill(pool_t *p, long bytes, size_t lo, size_t hi, uint64_t *rng) {
  for (long used = 0; used < bytes;) {
    size_t size = wl_rand_range(rng, lo, hi);
    char *b = wl_check(malloc(size), "malloc returned NULL");
    memset(b, 0x5A, size);
    pool_push(p, b);
    used += (long)size;
  }
}

static void pool_free_all(pool_t *p) {
  for (long i = 0; i < p->count; i++) free(p->block[i]);
  p->count = 0;
}

static void phase_done(int phase, double t0) {
  printf("phase_%d_rss_kib=%ld\nphase_%d_end_s=%.3f\n", phase, rss_kib(), phase, wl_now() - t0);
}

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "footprint: shifting size mix in 5 phases, RSS over time (memory given back?)");
  uint64_t rng = o.seed;
  long unit = (long)(MIB * o.scale);
  if (unit < 64 * 1024) unit = 64 * 1024;
  pool_t small = {0}, medium = {0}, large = {0};
  double t0 = wl_now();

  pool_fill(&small, 48 * unit, 16, 128, &rng);
  for (long i = 0; i < small.count; i++)
    if (wl_rand(&rng) % 10 != 0) { free(small.block[i]); small.block[i] = NULL; }
  phase_done(1, t0);

  pool_fill(&medium, 48 * unit, 1024, 16384, &rng);
  pool_free_all(&medium);
  phase_done(2, t0);

  /* Large blocks: sizes kept beside the pool so the live total is exact. */
  long live = 0, steps = wl_scaled(&o, 2000, 50);
  size_t *large_size = wl_check(malloc((size_t)steps * sizeof(size_t)), "malloc returned NULL");
  for (long step = 0; step < steps; step++) {
    size_t size = wl_rand_range(&rng, 64 * 1024, MIB);
    char *b = wl_check(malloc(size), "malloc returned NULL");
    memset(b, 0x33, size);
    large_size[large.count] = size;
    pool_push(&large, b);
    live += (long)size;
    while (live > 32 * unit && large.count > 0) {
      long victim = (long)(wl_rand(&rng) % (uint64_t)large.count);
      live -= (long)large_size[victim];
      free(large.block[victim]);
      large.count--;
      large.block[victim] = large.block[large.count];
      large_size[victim] = large_size[large.count];
    }
  }
  free(large_size);
  pool_free_all(&large);
  phase_done(3, t0);

  pool_free_all(&small);
  usleep(300 * 1000);
  phase_done(4, t0);

  pool_fill(&small, 24 * unit, 16, 128, &rng);
  phase_done(5, t0);
  pool_free_all(&small);
  free(small.block);
  free(medium.block);
  free(large.block);
  wl_report(wl_now() - t0, 0);
  return 0;
}
