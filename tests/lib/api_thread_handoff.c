/* api_thread_handoff.c — thread churn where later threads free what earlier
 * ones allocated must not grow memory.
 *
 * Workers run two at a time. Each allocates 300 blocks (16 B-1 KiB, one in
 * ten 1-64 KiB), writes a pattern into each and swaps it into a shared table
 * of 4,096 slots, checking and freeing the block it displaces. Live data
 * stays near 15 MiB, and nearly every block is freed by a thread other than
 * the one that allocated it, usually after that thread has exited: into an
 * abandoned segment. Those segments are only given back when some thread
 * adopts them; when new threads adopted only the segments their predecessor
 * had just left, older ones sank out of reach, mapped and resident:
 * 1.2 GiB of address space and 280 MiB of RSS more per 1,000 threads.
 *
 * The check compares the address space and RSS after 1,000 threads with the
 * values after 3,000, with no malloc_trim in between (trim adopts every
 * abandoned segment and would hide the pile-up). Standard names only, so it
 * also runs on glibc (and preloaded). */
#define _GNU_SOURCE
#include "api_check.h"

#include <pthread.h>
#include <stdatomic.h>

enum { SLOTS = 4096, BLOCKS_PER_THREAD = 300, WARMUP_THREADS = 1000, TOTAL_THREADS = 3000 };

static _Atomic(unsigned char *) slots[SLOTS];
static atomic_long bad_blocks;

static unsigned char pattern(size_t size) { return (unsigned char)(size * 131 >> 3); }

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  for (int i = 0; i < BLOCKS_PER_THREAD; i++) {
    unsigned r = (unsigned)rand_r(&seed);
    size_t size = r % 10 == 0 ? 1024 + r % 65536 : 16 + r % 1008;
    unsigned char *p = malloc(size);
    if (p == NULL) {
      atomic_fetch_add(&bad_blocks, 1);
      return NULL;
    }
    memcpy(p, &size, sizeof size);
    memset(p + sizeof size, pattern(size), size - sizeof size);
    unsigned char *old = atomic_exchange(&slots[(unsigned)rand_r(&seed) % SLOTS], p);
    if (old != NULL) {
      size_t old_size;
      memcpy(&old_size, old, sizeof old_size);
      for (size_t k = sizeof old_size; k < old_size; k++)
        if (old[k] != pattern(old_size)) {
          atomic_fetch_add(&bad_blocks, 1);
          break;
        }
      free(old);
    }
  }
  return NULL;
}

static void run_threads(int from, int to) {
  for (int i = from; i < to; i += 2) {
    pthread_t t[2];
    for (int j = 0; j < 2; j++)
      REQUIRE(pthread_create(&t[j], NULL, worker, (void *)(uintptr_t)(i + j + 1)) == 0, "pthread_create");
    for (int j = 0; j < 2; j++) pthread_join(t[j], NULL);
  }
}

int main(int argc, char **argv) {
  api_require_tessera_if_asked(argc, argv);
  run_threads(0, WARMUP_THREADS);
  int64_t vsz0 = api_vsz_bytes(), rss0 = api_rss_bytes();
  run_threads(WARMUP_THREADS, TOTAL_THREADS);
  int64_t vsz1 = api_vsz_bytes(), rss1 = api_rss_bytes();
  printf("after %d threads: address space %lld MiB, RSS %lld MiB; after %d: %lld MiB, %lld MiB\n", WARMUP_THREADS,
         (long long)(vsz0 / MIB), (long long)(rss0 / MIB), TOTAL_THREADS, (long long)(vsz1 / MIB),
         (long long)(rss1 / MIB));
  CHECK(atomic_load(&bad_blocks) == 0, "%ld blocks failed or came back changed", atomic_load(&bad_blocks));
  CHECK(vsz1 - vsz0 < 384 * MIB, "address space grew by %lld MiB over %d threads", (long long)((vsz1 - vsz0) / MIB),
        TOTAL_THREADS - WARMUP_THREADS);
  CHECK(rss1 - rss0 < 96 * MIB, "RSS grew by %lld MiB over %d threads", (long long)((rss1 - rss0) / MIB),
        TOTAL_THREADS - WARMUP_THREADS);
  for (int i = 0; i < SLOTS; i++) free(atomic_load(&slots[i]));
  return api_finish("api_thread_handoff");
}
