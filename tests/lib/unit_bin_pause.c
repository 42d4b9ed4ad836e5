/* unit_bin_pause.c — a heap whose mallocs mostly come from pages pauses
 * its bins; one whose mallocs the bins serve keeps them (twenty-ninth
 * session, bpz29: heap.c, bins_window_end).
 *
 * Where frees and mallocs come in runs longer than a bin holds (the
 * traces-cmu15213-64bit row: 73-76% of the recycled mallocs from bins),
 * each bin push and pop costs more than it saves: the row's CPU time was
 * 0.92 of the default's with TESSERA_BINS=0. At each timed flush (once per
 * purge delay) a heap compares the window's bin pops with the blocks its
 * pages recycled; under 85% it sets every bin's limit to 0 for three
 * windows, then turns them on for one to measure again.
 *
 * Thread a: rounds of 20,000 blocks of 48 B, all allocated, then all
 * freed: a bin holds at most 4,096 (TES_BIN_GROWN_BLOCKS), so at most a
 * fifth of the mallocs are pops. Its 48 B bin's limit must be seen at 0
 * within 60 windows. Thread b: rounds of 500 blocks (bench_batch's kind:
 * the bin grows to hold a round) and a ping-pong: its limits must never be
 * 0 over 12 windows. a's bins must also come on again (the probe) after
 * the pause. Before the pause a's limit was never 0. Windows are
 * counted by the heap's next flush time (bins_due) moving, so the test
 * waits for flushes, not for a clock. */
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <stdint.h>

#define DELAY_MS 5

typedef struct {
  int round_blocks;  /* blocks allocated, then freed, each round */
  int windows;       /* timed flushes to run through (at most, for a) */
  bool stop_at_probe; /* a: done once the limit is seen at 0, then on again (the probe) */
  int windows_seen;  /* out */
  int zero_samples;  /* out: rounds that ended with the 48 B bin's limit 0 */
  int samples;       /* out */
  int probe_window;  /* out: windows seen when the limit was on again after 0 */
} run_t;

static void *rounds(void *arg) {
  run_t *r = arg;
  free(malloc(48));
  tes_heap_t *heap = tes_tls_heap;
  REQUIRE(!heap->is_static, "no thread heap after the first malloc");
  const tes_bin_t *bin = &heap->bins[tes_class_of(48)];
  void **blocks = malloc(sizeof(void *) * (size_t)r->round_blocks);
  REQUIRE(blocks != NULL, "malloc failed");
  int64_t due = heap->bins_due;
  while (r->windows_seen < r->windows) {
    for (int i = 0; i < r->round_blocks; i++) {
      blocks[i] = malloc(48);
      REQUIRE(blocks[i] != NULL, "malloc failed");
      *(volatile char *)blocks[i] = (char)i;
    }
    for (int i = 0; i < r->round_blocks; i++) free(blocks[i]);
    for (int i = 0; i < 64; i++) free(malloc(48)); /* a ping-pong too */
    r->samples++;
    if (heap->bins_due != due) {
      due = heap->bins_due;
      r->windows_seen++;
    }
    if (bin->limit == 0) {
      r->zero_samples++;
    } else if (r->zero_samples > 0 && r->probe_window == 0) {
      r->probe_window = r->windows_seen;
      if (r->stop_at_probe) break;
    }
  }
  free(blocks);
  return NULL;
}

static void run(run_t *r) {
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, rounds, r) == 0, "pthread_create");
  REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
}

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, DELAY_MS) == 0, "cannot set the purge delay");
  run_t a = {.round_blocks = 20000, .windows = 60, .stop_at_probe = true};
  run(&a);
  CHECK(a.zero_samples > 0, "page-served rounds: the bins never paused (%d windows, %d rounds)", a.windows_seen,
        a.samples);
  CHECK(a.zero_samples == 0 || a.probe_window > 0, "page-served rounds: the paused bins never came on to measure again");
  run_t b = {.round_blocks = 500, .windows = 12};
  run(&b);
  CHECK(b.zero_samples == 0, "bin-served rounds: the bins paused at %d of %d rounds (%d windows)", b.zero_samples,
        b.samples, b.windows_seen);
  printf("page-served: paused %d rounds, on again at window %d (%d rounds); bin-served: %d rounds, %d windows, %d paused\n",
         a.zero_samples, a.probe_window, a.samples, b.samples, b.windows_seen, b.zero_samples);
  return unit_finish("unit_bin_pause");
}
