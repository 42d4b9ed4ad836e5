/* large_cycle.c — the cost of one large malloc+free cycle, in instructions
 * (callgrind) and in time.
 *
 *   large_cycle_bench [--threads 1] SIZE|random|random-live CYCLES
 *
 * SIZE (bytes, or with a K or M suffix) mallocs and frees one block of that
 * size CYCLES times; `random` draws each size uniformly from [128 KiB,
 * 4 MiB]; `random-live` does the same over a pool of 64 live blocks, one
 * replaced each cycle (so the segment cache holds several sizes, as in the
 * `mixed` workload). The first and last byte of each block are written, as
 * `mixed` does. The measured loop is run_cycles, for
 *   valgrind --tool=callgrind --toggle-collect=run_cycles
 * (instructions per cycle: the difference of two runs of different CYCLES,
 * divided by their difference); the program prints the loop's time per cycle
 * (CLOCK_MONOTONIC). Standard malloc/free only: any allocator can be
 * measured through LD_PRELOAD (bench/ab_preload.py times it: BIN=this
 * program, THREADS 1, and SIZE CYCLES after its `--`). Built with -fno-builtin so no call is elided. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIZE_TABLE 4096
#define LIVE 64

static size_t sizes[SIZE_TABLE];
static unsigned char *live[LIVE];

#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

static void touch(unsigned char *p, size_t size) {
  p[0] = 1;
  p[size - 1] = 1;
  KEEP(p);
}

__attribute__((noinline)) void run_cycles(long cycles, int pool) {
  for (long i = 0; i < cycles; i++) {
    size_t size = sizes[i & (SIZE_TABLE - 1)];
    if (pool) {
      unsigned slot = (unsigned)(size >> 12) % LIVE; /* sizes are random: so is the slot */
      free(live[slot]);
      live[slot] = malloc(size);
      touch(live[slot], size);
    } else {
      unsigned char *p = malloc(size);
      touch(p, size);
      free(p);
    }
  }
}

static size_t parse_size(const char *s) {
  char *end;
  size_t n = strtoul(s, &end, 10);
  if (*end == 'K' || *end == 'k') n <<= 10;
  else if (*end == 'M' || *end == 'm') n <<= 20;
  else if (*end != '\0') n = 0;
  return n;
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "--threads") && !strcmp(argv[2], "1")) { /* ab_preload.py's form */
    argv += 2;
    argc -= 2;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: %s SIZE|random|random-live CYCLES\n", argv[0]);
    return 2;
  }
  long cycles = strtol(argv[2], NULL, 10);
  int random = !strcmp(argv[1], "random"), pool = !strcmp(argv[1], "random-live");
  size_t fixed = random || pool ? 0 : parse_size(argv[1]);
  if (cycles <= 0 || (!random && !pool && fixed == 0)) {
    fprintf(stderr, "%s: bad SIZE or CYCLES\n", argv[0]);
    return 2;
  }
  unsigned long x = 88172645463325252ul; /* xorshift: the same sizes every run */
  for (int i = 0; i < SIZE_TABLE; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    sizes[i] = fixed ? fixed : ((size_t)128 << 10) + x % (((size_t)4 << 20) - ((size_t)128 << 10) + 1);
  }
  /* Warm up outside the measured loop: the first mappings are not the cycle. */
  if (pool) {
    for (int i = 0; i < LIVE; i++) touch(live[i] = malloc(sizes[i]), sizes[i]);
  }
  run_cycles(SIZE_TABLE, pool);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  run_cycles(cycles, pool);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)cycles;
  printf("%s cycles=%ld ns_per_cycle=%.1f work_s=%.6f\n", argv[1], cycles, ns, ns * (double)cycles / 1e9);
  return 0;
}
