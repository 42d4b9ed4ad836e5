/* test_fit_exhaustion.c — what happens when sbrk fails, for every variant.
 * Each case runs in a child whose RLIMIT_DATA (which bounds the program
 * break) allows only a few more MiB: allocating 256 KiB blocks must end in
 * NULL with errno=ENOMEM, not a crash; the heap must stay consistent and its
 * accounting equal to the break's movement; freed memory must be reusable
 * without new memory; and small requests must still be served from it.
 */
#include "fit_test.h"

#include <errno.h>
#include <sys/resource.h>

#define BLOCK (256u * 1024u)
#define MAX_BLOCKS 1024

/* VmData of this process in bytes (what RLIMIT_DATA is compared with). */
static unsigned long vm_data_bytes(void) {
  FILE *f = fopen("/proc/self/status", "r");
  CHECK(f != NULL);
  char line[256];
  unsigned long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmData: %lu kB", &kb) == 1) break;
  fclose(f);
  CHECK(kb > 0);
  return kb * 1024;
}

static void case_exhaustion(const fit_test_api_t *api) {
  static char *blocks[MAX_BLOCKS];
  char *warm = api->alloc(16); /* first-use costs before the limit */
  CHECK(warm);
  struct rlimit lim;
  CHECK(getrlimit(RLIMIT_DATA, &lim) == 0);
  lim.rlim_cur = vm_data_bytes() + 8u * 1024u * 1024u;
  CHECK(setrlimit(RLIMIT_DATA, &lim) == 0);

  char *brk0 = sbrk(0);
  unsigned long seg0 = get_data_segment_size();
  int n = 0;
  errno = 0;
  while (n < MAX_BLOCKS && (blocks[n] = api->alloc(BLOCK)) != NULL) {
    memset(blocks[n], n, BLOCK);
    n++;
  }
  CHECK(n < MAX_BLOCKS);           /* the limit was reached ... */
  CHECK(n >= 8);                   /* ... after using what it allowed */
  CHECK(blocks[n] == NULL && errno == ENOMEM);
  CHECK((unsigned long)((char *)sbrk(0) - brk0) == get_data_segment_size() - seg0);
  CHECK_HEAP();

  /* Free one in the middle: the same request fits again without growing. */
  unsigned long seg = get_data_segment_size();
  api->release(blocks[n / 2]);
  char *again = api->alloc(BLOCK);
  CHECK(again == blocks[n / 2]);
  memset(again, n / 2, BLOCK);
  CHECK(get_data_segment_size() == seg);
  /* Small requests are carved from a freed block while the break is stuck. */
  api->release(blocks[0]);
  for (int i = 0; i < 100; i++) {
    char *small = api->alloc(1000);
    CHECK(small != NULL && small >= blocks[0] && small < blocks[0] + BLOCK);
  }
  CHECK(get_data_segment_size() == seg);
  for (int i = 1; i < n; i++) {
    char *b = i == n / 2 ? again : blocks[i];
    for (unsigned k = 0; k < BLOCK; k += 4096) CHECK((unsigned char)b[k] == (unsigned char)i);
  }
  CHECK_HEAP();
}

int main(void) {
  int failed = 0;
  for (size_t i = 0; i < FIT_TEST_API_COUNT; i++)
    failed += fit_test_run("exhaustion", case_exhaustion, &fit_test_apis[i]);
  printf("%d failed\n", failed);
  return failed ? 1 : 0;
}
