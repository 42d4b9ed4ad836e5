/* remote_emptied_rss.c — pages another thread emptied, of a size the
 * program no longer allocates, must give their memory back
 * (security.*_remote_emptied_rss).
 *
 *   remote_emptied_rss MB SIZE OTHER_SIZE SECONDS
 *
 * The main thread allocates MB MiB of SIZE-byte blocks (written), a second
 * thread frees them all, and the main thread then only allocates and frees
 * batches of OTHER_SIZE bytes (slow-path mallocs of another class) for up
 * to SECONDS. Passes (exit 0, "given back") as soon as the RSS is within
 * 16 MiB of the start; fails (exit 1) if it is not by then. Until the
 * fourteenth session the emptied pages waited on their class queue for a
 * malloc of SIZE that never came: 100 MiB stayed resident for good. Standard
 * names only: run with the library under test preloaded (exit 3 when no
 * libtessera is loaded, so a broken preload cannot pass). */
#define _GNU_SOURCE
#include "api_check.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void **blocks;
static size_t count;

static void *free_all(void *arg) {
  (void)arg;
  for (size_t i = 0; i < count; i++) free(blocks[i]);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: remote_emptied_rss MB SIZE OTHER_SIZE SECONDS\n");
    return 2;
  }
  if (dlsym(RTLD_DEFAULT, "tes_malloc") == NULL) {
    fprintf(stderr, "remote_emptied_rss: libtessera is not loaded\n");
    return 3;
  }
  size_t mb = strtoul(argv[1], NULL, 10), size = strtoul(argv[2], NULL, 10), other = strtoul(argv[3], NULL, 10);
  double seconds = strtod(argv[4], NULL);
  long start = (long)(api_rss_bytes() / 1024);
  count = (mb << 20) / size;
  blocks = malloc(count * sizeof *blocks);
  if (blocks == NULL) return 2;
  for (size_t i = 0; i < count; i++) {
    blocks[i] = malloc(size);
    if (blocks[i] == NULL) return 2;
    memset(blocks[i], 0x5a, size);
  }
  long full = (long)(api_rss_bytes() / 1024);
  pthread_t t;
  if (pthread_create(&t, NULL, free_all, NULL) != 0) return 2;
  pthread_join(t, NULL);
  free(blocks);
  enum { BATCH = 2000 };
  static void *batch[BATCH];
  double t0 = api_now_seconds();
  long rss = (long)(api_rss_bytes() / 1024);
  /* `seconds` of this thread's mallocs (active_clock.h: a gap counts 10 ms
   * at most), not of the wall clock, which a stopped process passes with
   * none (twentieth session). */
  active_clock_t clock;
  active_clock_start(&clock);
  while (rss > start + 16 * 1024 && active_clock_tick(&clock, 0.01) < seconds) {
    for (int i = 0; i < BATCH; i++) batch[i] = malloc(other);
    for (int i = 0; i < BATCH; i++) free(batch[i]);
    rss = (long)(api_rss_bytes() / 1024);
  }
  printf("RSS %ld KiB at the start, %ld with %zu MiB of %zu-byte blocks, %ld after the remote frees and %.2f s of %zu-byte mallocs\n",
         start, full, mb, size, rss, api_now_seconds() - t0, other);
  if (rss > start + 16 * 1024) return 1;
  printf("given back\n");
  return 0;
}
