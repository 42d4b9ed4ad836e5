/* unit_bin_pause_double_free.c — a double free with other frees between
 * (`free(p); free(q); free(p)`, security's double_free_not_head, which
 * RELIABILITY.md's table says the default build reports since the eleventh
 * session) in a heap whose bins are paused (heap.c, bins_window_end,
 * bpz29; found by rev29, twenty-ninth session).
 *
 * The default build finds such a free through its bins only (the bin's
 * mark: TES_BIN_POP_OR_RETURN, tes_free_owned_checked). Paused, every
 * limit is 0 and the frees go to the page's local list, as with
 * TESSERA_BINS=0: p is linked there twice (a cycle p -> q -> p), the
 * page's `used` wraps below zero (4294967295), and nothing is reported.
 * So the report depends on the program's history (page-heavy rounds
 * before it pause the bins), which the security cases, too short to
 * pause, do not see.
 *
 * lib.unit_bin_pause_double_free runs with the default TESSERA_BINS (1)
 * and fails on the merged bpz29 code; lib.unit_bin_pause_double_free.bins2
 * (TESSERA_BINS=2, never paused) is its control and passes. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define DELAY_MS 5
#define ROUND 20000
#define MAX_WINDOWS 400

static void *round_blocks[ROUND];
static int err_fd;
static bool paused;
static uint32_t used_after, capacity;

static void *run(void *arg) {
  (void)arg;
  free(malloc(48));
  tes_heap_t *heap = tes_tls_heap;
  REQUIRE(!heap->is_static, "no thread heap after the first malloc");
  /* Page-heavy rounds until the bins pause (never with TESSERA_BINS=2). */
  int64_t due = heap->bins_due;
  int most = tes_option_get(TES_OPTION_BINS) == 1 ? MAX_WINDOWS : 0;
  for (int windows = 0; windows < most && heap->bins_paused == 0;) {
    for (int i = 0; i < ROUND; i++) round_blocks[i] = malloc(48);
    for (int i = 0; i < ROUND; i++) free(round_blocks[i]);
    if (heap->bins_due != due) {
      due = heap->bins_due;
      windows++;
    }
  }
  paused = heap->bins_paused != 0;
  int saved = dup(2);
  dup2(err_fd, 2);
  char *p = malloc(40), *q = malloc(40);
  free(p);
  free(q);
  free(p);
  /* The bins report at the pop that reaches p without its mark. */
  char *got[4];
  for (int i = 0; i < 4; i++) got[i] = malloc(40);
  dup2(saved, 2);
  close(saved);
  tes_page_t *page = tes_page_of(tes_segment_of(p), p);
  used_after = page->used;
  capacity = page->capacity;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < i; j++) CHECK(got[i] != got[j], "a block handed out twice: %p", (void *)got[i]);
  return NULL;
}

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, DELAY_MS) == 0, "cannot set the purge delay");
  tes_option_set(TES_OPTION_ABORT_ON_ERROR, 0);
  char path[] = "/tmp/tessera-bin-pause-df-XXXXXX";
  err_fd = mkstemp(path);
  REQUIRE(err_fd >= 0, "mkstemp");
  unlink(path);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, run, NULL) == 0 && pthread_join(t, NULL) == 0, "thread");
  char text[512];
  ssize_t n = pread(err_fd, text, sizeof text - 1, 0);
  text[n > 0 ? n : 0] = '\0';
  close(err_fd);
  CHECK(strstr(text, "double free") != NULL, "free(p); free(q); free(p) not reported (bins %s)",
        paused ? "paused" : "on");
  CHECK(used_after <= capacity, "the page's used count wrapped: %u of %u blocks", used_after, capacity);
  printf("bins %s; stderr: \"%.200s\"\n", paused ? "paused" : "on", text);
  return unit_finish("unit_bin_pause_double_free");
}
