/* unit_remote_line.c — another thread's free of a small or medium block
 * reads nothing from its page's first cache line (default build,
 * src/internal.h: area_if_in_use and bin_for_remote, copies kept on the
 * line of xthread_free, which the free's CAS takes anyway). The first line
 * is the owner's hottest (free, local_free, used): a remote free that read
 * in_use, area and bin there pulled it to the freeing core, and the owner's
 * next write waited to get it back (mstress split over two cores, tcm27 in
 * docs/PERFORMANCE.md).
 *
 * The test: the owner (main) allocates blocks of small and medium classes;
 * for each block's page it checks the copies against the first line's
 * fields, then hides the first line's view of the page (in_use 0, area past
 * the block, bin set to the value planted as the block's mark) and has a
 * second thread free the block. The free must reach the page's remote stack
 * (one block more in its count) without a report; a free that read the
 * first line took the block for an invalid free or a double free (the old
 * code: every block refused). The fields are then restored and the pages
 * checked again after all but the first block of each kind are freed (the
 * first keeps its segment mapped; retired pages: no copy left claiming them
 * in use). */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#if TES_SECURE
int main(void) {
  puts("unit_remote_line: the hardened build's remote frees keep their own checks");
  return 77;
}
#else

static_assert(offsetof(tes_page_t, area_if_in_use) / 64 == offsetof(tes_page_t, xthread_free) / 64,
              "the in-use copy shares the remote frees' line");
static_assert(offsetof(tes_page_t, bin_for_remote) / 64 == offsetof(tes_page_t, xthread_free) / 64,
              "the bin copy shares the remote frees' line");

static const size_t sizes[] = {16, 48, 256, 1000, 3000, 9000, 40000};
enum { KINDS = sizeof sizes / sizeof sizes[0], PER_KIND = 40 };
static void *blocks[KINDS][PER_KIND];

static tes_page_t *page_of(void *p) { return tes_page_of(tes_segment_of(p), p); }

static void check_copies(tes_page_t *page, const char *when) {
  const uint8_t *area = atomic_load_explicit(&page->area_if_in_use, memory_order_relaxed);
  CHECK(area == (page->in_use ? page->area : NULL), "%s: page %u's in-use copy %p, in_use %u, area %p", when,
        (unsigned)page->index, (const void *)area, (unsigned)page->in_use, (const void *)page->area);
  if (page->in_use)
    CHECK(atomic_load_explicit(&page->bin_for_remote, memory_order_relaxed) == page->bin,
          "%s: page %u's bin copy differs from its bin", when, (unsigned)page->index);
}

static void *victim;
static void *free_it(void *arg) {
  (void)arg;
  free(victim);
  return NULL;
}

int main(void) {
  for (int k = 0; k < KINDS; k++)
    for (int i = 0; i < PER_KIND; i++) REQUIRE((blocks[k][i] = malloc(sizes[k])) != NULL, "malloc");
  for (int k = 0; k < KINDS; k++)
    for (int i = 0; i < PER_KIND; i++) check_copies(page_of(blocks[k][i]), "fresh pages");

  /* One block of each kind freed by another thread with the page's first
   * line lying about it. */
  for (int k = 0; k < KINDS; k++) {
    void *p = blocks[k][PER_KIND - 1];
    tes_page_t *page = page_of(p);
    uint8_t in_use = page->in_use;
    uint8_t *area = page->area;
    tes_bin_t *bin = page->bin;
    uintptr_t before = tes_tf_count(atomic_load(&page->xthread_free));
    page->in_use = 0;
    page->area = (uint8_t *)p + 1;
    page->bin = (tes_bin_t *)(uintptr_t)0x7e57b10c0;
    *tes_bin_mark(p) = (uintptr_t)0x7e57b10c0; /* what a block in that "bin" would carry */
    victim = p;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_it, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    page->in_use = in_use;
    page->area = area;
    page->bin = bin;
    uintptr_t after = tes_tf_count(atomic_load(&page->xthread_free));
    CHECK(after == before + 1, "size %zu: the remote free did not reach the page's stack (count %lu -> %lu)",
          sizes[k], (unsigned long)before, (unsigned long)after);
    blocks[k][PER_KIND - 1] = NULL;
  }

  /* Most blocks freed (pages retire), then every page seen again. */
  tes_page_t *pages[KINDS][PER_KIND];
  for (int k = 0; k < KINDS; k++)
    for (int i = 0; i < PER_KIND; i++) pages[k][i] = blocks[k][i] ? page_of(blocks[k][i]) : NULL;
  for (int k = 0; k < KINDS; k++)
    for (int i = 1; i < PER_KIND; i++) free(blocks[k][i]), blocks[k][i] = NULL;
  tes_collect(true);
  for (int k = 0; k < KINDS; k++)
    for (int i = 0; i < PER_KIND; i++)
      if (pages[k][i]) check_copies(pages[k][i], "after frees and a collect");
  for (int k = 0; k < KINDS; k++) free(blocks[k][0]);
  return unit_finish("unit_remote_line");
}
#endif
