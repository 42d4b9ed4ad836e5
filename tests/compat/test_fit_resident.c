/* test_fit_resident.c — what prefaulting new break memory may make
 * resident, for every variant. New memory is prefaulted (MADV_POPULATE_WRITE)
 * because block headers land all over a fresh region; but a single large
 * request grows the break by exactly its block, and prefaulting that made
 * every byte of it resident at once, written or not: bf_malloc(256 MiB)
 * took 256 MiB of RAM before the program wrote a byte (glibc's malloc maps
 * such a block lazily), and a request of most of the RAM had the kernel's
 * OOM killer end a process instead of the request failing. Growths above
 * FIT_PREFAULT_MAX are now left to fault in as they are written; the small
 * growths of the fit workloads are prefaulted as before.
 */
#include "fit_test.h"

#include <errno.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define HUGE_REQUEST ((size_t)256 << 20)
#define SMALL_REQUEST ((size_t)1 << 20)

/* Resident bytes of this process. */
static size_t resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  CHECK(f != NULL);
  unsigned long size = 0, pages = 0;
  CHECK(fscanf(f, "%lu %lu", &size, &pages) == 2);
  fclose(f);
  return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Does this kernel populate on MADV_POPULATE_WRITE (5.14 and later)? */
static int kernel_populates(void) {
  void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(p != MAP_FAILED);
  int ok = madvise(p, 4096, MADV_POPULATE_WRITE) == 0;
  munmap(p, 4096);
  return ok;
}

static void case_huge_not_resident(const fit_test_api_t *api) {
  char *warm = api->alloc(16); /* first-use costs before measuring */
  CHECK(warm);
  size_t before = resident_bytes();
  unsigned long seg = get_data_segment_size();
  char *p = api->alloc(HUGE_REQUEST);
  CHECK(p != NULL);
  CHECK(get_data_segment_size() - seg >= HUGE_REQUEST);
  size_t grown = resident_bytes() - before;
  if (grown >= HUGE_REQUEST / 8) {
    fprintf(stderr, "a %zu-byte block made %zu bytes resident before it was written\n", HUGE_REQUEST, grown);
    exit(1);
  }
  /* Still a block like any other: written at both ends, freed, reused. */
  p[0] = 1;
  p[HUGE_REQUEST - 1] = 2;
  CHECK_HEAP();
  api->release(p);
  CHECK_HEAP();
  char *again = api->alloc(HUGE_REQUEST / 2);
  CHECK(again != NULL && get_data_segment_size() - seg < HUGE_REQUEST + 4096);
  api->release(again);
  api->release(warm);
  CHECK_HEAP();
}

/* The workloads' growths (one block each) are still prefaulted. */
static void case_small_prefaulted(const fit_test_api_t *api) {
  char *warm = api->alloc(16);
  CHECK(warm);
  size_t before = resident_bytes();
  char *p = api->alloc(SMALL_REQUEST);
  CHECK(p != NULL);
  size_t grown = resident_bytes() - before;
  if (grown < SMALL_REQUEST / 2) {
    fprintf(stderr, "a %zu-byte growth made only %zu bytes resident: not prefaulted\n", SMALL_REQUEST, grown);
    exit(1);
  }
  api->release(p);
  api->release(warm);
  CHECK_HEAP();
}

int main(void) {
  int failed = 0;
  const char *prefault = getenv("TESSERA_FIT_PREFAULT");
  int populates = kernel_populates() && !(prefault && strcmp(prefault, "0") == 0);
  for (size_t i = 0; i < FIT_TEST_API_COUNT; i++) {
    failed += fit_test_run("huge_not_resident", case_huge_not_resident, &fit_test_apis[i]);
    if (populates) failed += fit_test_run("small_prefaulted", case_small_prefaulted, &fit_test_apis[i]);
  }
  if (!populates) printf("(small_prefaulted not run: no MADV_POPULATE_WRITE here, or TESSERA_FIT_PREFAULT=0)\n");
  printf("%d failed\n", failed);
  return failed ? 1 : 0;
}
