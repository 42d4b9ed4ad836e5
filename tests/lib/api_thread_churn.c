/* api_thread_churn.c — 10,000 short-lived threads must not grow memory.
 *
 * Threads are started four at a time. Each allocates a mix of small and
 * medium blocks, frees most of them itself and hands the rest to the main
 * thread, which frees them after the thread has exited (frees into an
 * abandoned heap). An allocator that leaks a finishing thread's heap, or
 * never reuses abandoned pages, grows by tens of KiB per thread: hundreds of
 * MiB over the run. The check compares RSS (and, on libtessera, the
 * committed gauge of tes_stats) after a 1,000-thread warm-up with the value
 * after all 10,000 threads. Both points are taken right after
 * malloc_trim(0), so memory that is only waiting out the purge delay (one
 * 4 MiB cached segment more or less, depending on timing) does not count;
 * what a leak holds cannot be trimmed and still does.
 *
 * Standard names plus tes_stats_get looked up at run time, so the program
 * also runs against glibc to validate the RSS logic. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <malloc.h>
#include <pthread.h>

/* Weak: this program also runs without libtessera (see api_check.h). */
#pragma weak tes_stats_get

enum { TOTAL_THREADS = 10000, WARMUP_THREADS = 1000, BATCH = 4, BLOCKS_PER_THREAD = 200,
       HANDED_OVER = 50 };

typedef void stats_get_fn(tes_stats_t *);

static void *handed[BATCH][HANDED_OVER];
static size_t handed_size[BATCH][HANDED_OVER];

static void *short_lived(void *arg) {
  int slot = (int)(intptr_t)arg;
  void *blocks[BLOCKS_PER_THREAD];
  size_t sizes[BLOCKS_PER_THREAD];
  for (int i = 0; i < BLOCKS_PER_THREAD; i++) {
    sizes[i] = (i % 10 == 0) ? 2000 + (size_t)i * 10 : 16 + (size_t)(i * 37) % 400;
    blocks[i] = malloc(sizes[i]);
    if (blocks[i]) api_fill(blocks[i], sizes[i]);
  }
  for (int i = 0; i < BLOCKS_PER_THREAD; i++) {
    if (i < HANDED_OVER) {
      handed[slot][i] = blocks[i];
      handed_size[slot][i] = sizes[i];
    } else {
      free(blocks[i]);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  api_require_tessera_if_asked(argc, argv);
  stats_get_fn *stats_get = (stats_get_fn *)API_TESSERA_FN(tes_stats_get, "tes_stats_get");
  static tes_stats_t before, after;

  API_GROUP("thread churn");
  long corrupted = 0, failed = 0;
  int64_t rss_warm = 0;
  for (int started = 0; started < TOTAL_THREADS; started += BATCH) {
    pthread_t threads[BATCH];
    for (int t = 0; t < BATCH; t++)
      REQUIRE(pthread_create(&threads[t], NULL, short_lived, (void *)(intptr_t)t) == 0,
              "pthread_create failed after %d threads", started);
    for (int t = 0; t < BATCH; t++) pthread_join(threads[t], NULL);
    for (int t = 0; t < BATCH; t++)
      for (int i = 0; i < HANDED_OVER; i++) {
        if (!handed[t][i]) {
          failed++;
          continue;
        }
        if (api_verify(handed[t][i], handed_size[t][i]) != SIZE_MAX) corrupted++;
        free(handed[t][i]);
        handed[t][i] = NULL;
      }
    if (started + BATCH == WARMUP_THREADS) {
      malloc_trim(0);
      rss_warm = api_rss_bytes();
      if (stats_get) stats_get(&before);
    }
  }
  malloc_trim(0);
  int64_t rss_end = api_rss_bytes();
  CHECK(failed == 0, "%ld allocations failed", failed);
  CHECK(corrupted == 0, "%ld blocks handed over by exiting threads were corrupted", corrupted);
  /* Each thread touches ~60 KiB; a leak per thread would be ~500 MiB. */
  CHECK(rss_end - rss_warm <= 8 * MIB, "RSS grew by %.1f MiB from thread 1,000 to 10,000",
        (double)(rss_end - rss_warm) / MIB);
  printf("rss after %d threads: %.1f MiB, after %d: %.1f MiB\n", WARMUP_THREADS,
         (double)rss_warm / MIB, TOTAL_THREADS, (double)rss_end / MIB);
  if (stats_get) {
    stats_get(&after);
    CHECK(after.threads_started >= TOTAL_THREADS, "threads_started = %" PRIu64, after.threads_started);
    CHECK(after.threads_exited >= TOTAL_THREADS, "threads_exited = %" PRIu64, after.threads_exited);
    CHECK(after.committed.current - before.committed.current <= 8 * MIB,
          "committed grew by %.1f MiB from thread 1,000 to 10,000",
          (double)(after.committed.current - before.committed.current) / MIB);
    CHECK(after.reserved.current - before.reserved.current <= 16 * MIB,
          "reserved grew by %.1f MiB from thread 1,000 to 10,000",
          (double)(after.reserved.current - before.reserved.current) / MIB);
    /* Exited threads' heaps are abandoned and their memory taken over. */
    CHECK(after.heaps_abandoned > 0 || after.heaps_reclaimed > 0,
          "no heap was abandoned or reclaimed across %d thread exits", TOTAL_THREADS);
    printf("tes_stats: threads_started=%" PRIu64 " exited=%" PRIu64 " abandoned=%" PRIu64
           " reclaimed=%" PRIu64 " committed %.1f -> %.1f MiB\n",
           after.threads_started, after.threads_exited, after.heaps_abandoned, after.heaps_reclaimed,
           (double)before.committed.current / MIB, (double)after.committed.current / MIB);
  }
  return api_finish("api_thread_churn");
}
