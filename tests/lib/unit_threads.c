/* unit_threads.c — thread exit and reuse (src/init.c, heap.c): a thread
 * that exits with live blocks abandons its segments; a live thread adopts
 * them (heaps_reclaimed) and their blocks stay valid and freeable from any
 * thread; 2,000 short-lived threads that each keep a few blocks do not make
 * the reserved memory grow without bound. */
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>

enum { KEPT = 50 };

static void *allocate_and_exit(void *arg) {
  void **out = arg;
  for (int i = 0; i < KEPT; i++) {
    out[i] = tes_malloc(48 + (size_t)i * 16);
    memset(out[i], i, 48 + (size_t)i * 16);
  }
  void *scratch = tes_malloc(5000); /* freed: its page empties */
  tes_free(scratch);
  return NULL;
}

static void *free_them(void *arg) {
  void **blocks = arg;
  for (int i = 0; i < KEPT; i++) tes_free(blocks[i]);
  return NULL;
}

int main(void) {
  /* The abandon at thread exit and the adoption are the subject: an exited
   * thread's heap is not parked for the next new thread here
   * (TESSERA_HEAP_PARK=0; parking: api_thread_reuse.c). */
  REQUIRE(tes_option_set(TES_OPTION_HEAP_PARK, 0) == 0, "TESSERA_HEAP_PARK=0");
  tes_stats_t s0, s1;
  free(malloc(1)); /* this thread has a heap */
  tes_stats_get(&s0);
  static void *kept[KEPT];
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, allocate_and_exit, kept) == 0, "pthread_create");
  pthread_join(t, NULL);
  tes_stats_get(&s1);
  CHECK(s1.threads_exited > s0.threads_exited, "thread exit not seen");
  CHECK(s1.heaps_abandoned > s0.heaps_abandoned, "exiting thread with live blocks abandoned nothing");
  CHECK(tes_abandoned_count() > 0, "no abandoned segment waiting");

  /* Adoption: this thread takes the segments over on its slow path. */
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(s1.heaps_reclaimed > s0.heaps_reclaimed, "abandoned segments not reclaimed");
  CHECK(tes_abandoned_count() == 0, "%zu segments still abandoned", tes_abandoned_count());
  for (int i = 0; i < KEPT; i++) {
    unsigned char *b = kept[i];
    size_t bad = 0;
    for (size_t k = 0; k < 48 + (size_t)i * 16; k++) bad += b[k] != (unsigned char)i;
    CHECK(bad == 0, "block %d of the exited thread corrupted (%zu bytes)", i, bad);
    CHECK(tes_segment_of(b)->heap == tes_tls_heap, "adopted block %d not owned by this heap", i);
  }
  /* Now freed from yet another thread (remote frees into adopted pages). */
  REQUIRE(pthread_create(&t, NULL, free_them, kept) == 0, "pthread_create");
  pthread_join(t, NULL);
  tes_collect(true);

  /* Churn: 2,000 threads, each leaving 50 blocks; freed in batches. */
  tes_stats_get(&s0);
  int64_t reserved_peak = 0;
  static void *batch[20][KEPT];
  for (int round = 0; round < 100; round++) {
    pthread_t ts[20];
    for (int k = 0; k < 20; k++) REQUIRE(pthread_create(&ts[k], NULL, allocate_and_exit, batch[k]) == 0, "create");
    for (int k = 0; k < 20; k++) pthread_join(ts[k], NULL);
    for (int k = 0; k < 20; k++)
      for (int i = 0; i < KEPT; i++) tes_free(batch[k][i]);
    tes_stats_get(&s1);
    if (round >= 10 && s1.reserved.current > reserved_peak) reserved_peak = s1.reserved.current;
    if (round == 10) reserved_peak = s1.reserved.current;
  }
  tes_stats_get(&s1);
  CHECK(s1.threads_exited - s0.threads_exited >= 2000, "%lu threads exited",
        (unsigned long)(s1.threads_exited - s0.threads_exited));
  CHECK(s1.reserved.current <= reserved_peak, "reserved keeps growing: %.1f MiB after 2000 threads",
        s1.reserved.current / 1048576.0);
  /* As before s0: the cache of free segments, whose size at any instant
   * depends on how the threads were scheduled, is emptied, so what is left
   * is what the exited threads still hold. */
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(s1.reserved.current - s0.reserved.current <= (int64_t)64 << 20,
        "reserved grew by %.1f MiB over 2,000 short-lived threads",
        (s1.reserved.current - s0.reserved.current) / 1048576.0);
  return unit_finish("unit_threads");
}
