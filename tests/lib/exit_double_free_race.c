/* exit_double_free_race.c — the hardened build in continue mode
 * (TESSERA_ABORT_ON_ERROR=0): blocks freed twice by other threads while
 * their owner exits. In each round an owner thread allocates small and
 * medium blocks and frees them, allocates a few large ones, hands them all
 * over and exits at once (its heap's collect retires the emptied pages and
 * parks or gives up the heap). Two other threads meanwhile free every
 * small and medium block a second time (remote frees of freed blocks), and
 * both free every large block (one free each is a double free, the two at
 * the same moment). The second free reads the page's `in_use` (src/free.c,
 * page_holds; src/large.c, tes_large_owned_block) while the exit's retire,
 * or the other large free, clears it (src/heap.c, tes_heap_page_retire and
 * kept_retire_all; large.c, tes_large_free): a data race ThreadSanitizer
 * reports unless both sides are atomic (review22, twenty-second session:
 * sanitize.lib_exit_double_free_race, with the tsan tree's hardened
 * library). Every double free must be reported, one line each, and nothing
 * else (also lib.exit_double_free_race.secure). The reports go to a
 * temporary file (fd 2) counted at the end; ThreadSanitizer's own report
 * goes to stdout. No block is handed out again while it can be freed a
 * second time: a double free of a block in use again is a write into a
 * live block, a race no allocator can make defined. tes_* calls only. */
#define _GNU_SOURCE
#include "tessera.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* fd 2 collects the library's reports: a sanitizer's go to stdout. */
#if defined(__SANITIZE_THREAD__)
const char *__tsan_default_options(void) { return "log_path=stdout"; }
#endif
#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void) { return "log_path=stdout"; }
const char *__ubsan_default_options(void) { return "log_path=stdout:print_stacktrace=1"; }
#endif

#define ROUNDS 150
#define BLOCKS 256 /* small and medium, freed by the owner, then again by one freer */
#define LARGE 4    /* large, freed by both freers */
#define FREERS 2

static void *_Atomic blocks[BLOCKS + LARGE];
static atomic_int handed; /* the round's blocks are in `blocks`, the first BLOCKS freed */
static atomic_long made;

static size_t size_of(unsigned round, unsigned i) {
  if (i >= BLOCKS) return ((size_t)256 << 10) + (i - BLOCKS) * 40960; /* large */
  unsigned r = (round * 7919u + i * 104729u) % 100;
  if (r < 80) return 16 + (r * 37u + i) % 1008; /* small classes */
  return 8192 + (r * 613u + i * 31u) % (56 * 1024); /* medium */
}

static void *owner(void *arg) {
  unsigned round = (unsigned)(uintptr_t)arg;
  for (unsigned i = 0; i < BLOCKS + LARGE; i++) {
    void *p = tes_malloc(size_of(round, i));
    if (p == NULL) {
      dprintf(1, "FAIL out of memory\n");
      _exit(1);
    }
    atomic_store_explicit(&blocks[i], p, memory_order_relaxed);
  }
  for (unsigned i = 0; i < BLOCKS; i++) tes_free(atomic_load_explicit(&blocks[i], memory_order_relaxed));
  atomic_store_explicit(&handed, 1, memory_order_release);
  return NULL; /* the exit: collect, retire, park */
}

static void *freer(void *arg) {
  unsigned first = (unsigned)(uintptr_t)arg;
  while (!atomic_load_explicit(&handed, memory_order_acquire)) sched_yield();
  for (unsigned i = BLOCKS; i < BLOCKS + LARGE; i++) tes_free(atomic_load_explicit(&blocks[i], memory_order_relaxed));
  if (first == 0) atomic_fetch_add_explicit(&made, LARGE, memory_order_relaxed); /* one free of each is a second */
  for (unsigned i = first; i < BLOCKS; i += FREERS) {
    atomic_fetch_add_explicit(&made, 1, memory_order_relaxed);
    tes_free(atomic_load_explicit(&blocks[i], memory_order_relaxed));
  }
  return NULL;
}

int main(void) {
  if (tes_option_get(TES_OPTION_SECURE) != 1) {
    dprintf(1, "exit_double_free_race: the hardened build only (the default build does not see every such free)\n");
    return 77;
  }
  if (tes_option_set(TES_OPTION_ABORT_ON_ERROR, 0) != 0) return 2;
  char path[] = "/tmp/tessera_exit_dfree_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || dup2(fd, 2) < 0) return 2;
  unlink(path);
  for (unsigned r = 0; r < ROUNDS; r++) {
    atomic_store(&handed, 0);
    pthread_t o, f[FREERS];
    if (pthread_create(&o, NULL, owner, (void *)(uintptr_t)r)) return 2;
    for (uintptr_t i = 0; i < FREERS; i++)
      if (pthread_create(&f[i], NULL, freer, (void *)i)) return 2;
    pthread_join(o, NULL);
    for (int i = 0; i < FREERS; i++) pthread_join(f[i], NULL);
  }
  /* Count the report lines: each a double free. */
  static const char prefix[] = "tessera: error: double free of ";
  static char text[1 << 16];
  char line[sizeof prefix];
  size_t at = 0;
  long reports = 0, other = 0;
  lseek(fd, 0, SEEK_SET);
  for (ssize_t got; (got = read(fd, text, sizeof text)) > 0;) {
    for (ssize_t i = 0; i < got; i++) {
      if (text[i] != '\n') {
        if (at < sizeof line) line[at] = text[i];
        at++;
        continue;
      }
      if (at >= sizeof prefix - 1 && memcmp(line, prefix, sizeof prefix - 1) == 0) reports++;
      else other++;
      at = 0;
    }
  }
  if (at != 0) other++; /* a last line without its newline */
  long want = atomic_load(&made);
  dprintf(1, "exit_double_free_race: double frees made %ld, reported %ld, other lines %ld\n", want, reports, other);
  return reports == want && other == 0 ? 0 : 1;
}
