/* api_adopted_double_free.c — a block that an exited thread freed, kept in
 * its parked heap's bin (bin_park: its page stays in use), freed again by
 * the thread that takes the heap over (review21, twenty-first session).
 *
 * That thread's slice table does not hold the adopted pages yet, so its
 * free took free_checked's "ours, slice lost" branch, which pushed the
 * block onto its page's local list past the bin and its checks: no report,
 * the block on two lists, and at that thread's exit the park's walk of the
 * bin followed the page's links to NULL (SIGSEGV in bin_park). Now the
 * free goes through the bin as the fast path's does: reported, and with
 * TESSERA_ABORT_ON_ERROR=0 the program goes on, no block handed out twice,
 * round after round (twenty-second session: ROUNDS, 8 by default).
 * Default build only (the hardened park flushes its bins). */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <pthread.h>
#include <stdatomic.h>

#define N 40
static void *blocks[N], *keep;
static atomic_int parked;

static void *exiting(void *arg) {
  keep = malloc(48); /* the page stays in use: the park keeps the bin */
  for (int i = 0; i < N; i++) blocks[i] = malloc(48);
  for (int i = 0; i < N; i++) free(blocks[i]);
  return arg;
}

/* Started before the exiting thread (another thread's stack and TLS,
 * as in a pool), it makes no call until that thread is gone: its first
 * free then takes the parked heap over. */
static void *adopter(void *arg) {
  while (!atomic_load(&parked)) {
  }
  for (int i = 0; i < N; i++) free(blocks[i]); /* again: each a double free */
  void *got[3 * N];
  int twice = 0;
  for (int i = 0; i < 3 * N; i++) {
    got[i] = malloc(48);
    memset(got[i], 0x5a, 48);
    for (int j = 0; j < i; j++) twice += got[i] == got[j];
  }
  for (int i = 0; i < 3 * N; i++) free(got[i]);
  *(int *)arg = twice;
  return NULL; /* exits: its park walks the bin again */
}

int main(void) {
  if (!api_allocator_is_tessera()) return 77;
  if (tes_option_get(TES_OPTION_SECURE) || !tes_option_get(TES_OPTION_HEAP_PARK) || !tes_option_get(TES_OPTION_BINS))
    return 77;
  tes_option_set(TES_OPTION_ABORT_ON_ERROR, 0);
  char path[] = "/tmp/tessera-adopted-df-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 1;
  unlink(path);
  int saved = dup(2);
  dup2(fd, 2);
  pthread_t t;
  int twice = -1;
  /* Several rounds, each thread taking over the heap the last one parked:
   * until the twenty-second session the second or third ended in a SIGSEGV
   * in the adopter's malloc (a block the full bin still held, freed again
   * onto its page's list, was handed out by both). Each must report. */
  int rounds = getenv("ROUNDS") ? atoi(getenv("ROUNDS")) : 8, silent = -1;
  for (int round = 0; round < rounds; round++) {
    pthread_t a;
    off_t from = lseek(fd, 0, SEEK_CUR);
    atomic_store(&parked, 0);
    pthread_create(&a, NULL, adopter, &twice);
    pthread_create(&t, NULL, exiting, NULL);
    pthread_join(t, NULL);
    atomic_store(&parked, 1);
    pthread_join(a, NULL);
    free(keep);
    if (twice != 0) break;
    char got[256];
    ssize_t m = pread(fd, got, sizeof got - 1, from);
    got[m > 0 ? m : 0] = '\0';
    if (silent < 0 && strstr(got, "double free") == NULL) silent = round;
  }
  dup2(saved, 2);
  close(saved);
  char text[8192];
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  text[n > 0 ? n : 0] = '\0';
  API_GROUP("a parked bin's block freed again by the adopting thread");
  CHECK(twice == 0, "%d blocks handed out twice", twice);
  CHECK(silent < 0, "round %d of %d reported nothing", silent, rounds);
  CHECK(strstr(text, "double free") != NULL, "no double free reported; stderr: \"%.200s\"", text);
  return api_finish("api_adopted_double_free");
}
