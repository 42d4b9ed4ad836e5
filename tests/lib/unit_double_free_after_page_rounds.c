/* unit_double_free_after_page_rounds.c — a double free with other frees
 * between (`free(p); free(q); free(p)`, security's double_free_not_head,
 * which the default build reports since the eleventh session) after a long
 * history of page-heavy rounds: 20,000 blocks of 48 B allocated then freed,
 * over many purge-delay windows (5 ms).
 *
 * The default build finds such a free through its bins only (the bin's
 * mark: TES_BIN_POP_OR_RETURN, tes_free_owned_checked). bpz29 (twenty-ninth
 * session) paused a heap's bins after such rounds (every limit 0, as with
 * TESSERA_BINS=0): p was then linked twice on its page's list (a cycle
 * p -> q -> p), the page's `used` wrapped below zero and nothing was
 * reported; rev29 found it with this program, and the pause was taken out
 * (RELIABILITY.md, twenty-ninth session, rev29). The report must not
 * depend on what the program did before. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define DELAY_MS 5
#define ROUND 20000
#define CHECKS 12 /* one after each window: every phase of a pause cycle (bpz29's: 3 paused, 1 on) */

static void *round_blocks[ROUND];
static int err_fd;
static int wrapped, twice;

/* Page-heavy rounds until one purge-delay window has ended (the bins'
 * timed flush moves bins_due). */
static void page_rounds_one_window(const tes_heap_t *heap) {
  int64_t due = heap->bins_due;
  while (heap->bins_due == due) {
    for (int i = 0; i < ROUND; i++) round_blocks[i] = malloc(48);
    for (int i = 0; i < ROUND; i++) free(round_blocks[i]);
  }
}

static void *run(void *arg) {
  (void)arg;
  free(malloc(48));
  tes_heap_t *heap = tes_tls_heap;
  REQUIRE(!heap->is_static, "no thread heap after the first malloc");
  for (int k = 0; k < CHECKS; k++) {
    page_rounds_one_window(heap);
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
    if (page->used > page->capacity) wrapped++;
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < i; j++)
        if (got[i] == got[j]) twice++;
    for (int i = 0; i < 4; i++) free(got[i]);
  }
  return NULL;
}

int main(void) {
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, DELAY_MS) == 0, "cannot set the purge delay");
  tes_option_set(TES_OPTION_ABORT_ON_ERROR, 0);
  char path[] = "/tmp/tessera-df-page-rounds-XXXXXX";
  err_fd = mkstemp(path);
  REQUIRE(err_fd >= 0, "mkstemp");
  unlink(path);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, run, NULL) == 0 && pthread_join(t, NULL) == 0, "thread");
  static char text[16384];
  ssize_t n = pread(err_fd, text, sizeof text - 1, 0);
  text[n > 0 ? n : 0] = '\0';
  close(err_fd);
  int reports = 0;
  for (const char *at = text; (at = strstr(at, "double free")) != NULL; at++) reports++;
  CHECK(reports == CHECKS, "free(p); free(q); free(p) after a window of page-heavy rounds: %d reports for %d double frees",
        reports, CHECKS);
  CHECK(wrapped == 0, "a page's used count wrapped after %d of the double frees", wrapped);
  CHECK(twice == 0, "a block handed out twice (%d pairs)", twice);
  return unit_finish("unit_double_free_after_page_rounds");
}
