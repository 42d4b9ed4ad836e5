/* unit_page_desc.c — page descriptors set up lazily (src/segment.c,
 * desc_setup; d89e965): a descriptor handed out by tes_segment_page_alloc
 * names a bin (tes_bin_closed until a heap takes the page) before
 * tes_page_init marks it in use. tes_heap_visit(NULL, ...) walks every
 * segment from any thread and reads page->bin->head of each page in use;
 * since descriptors were no longer set up whole at segment start, a page
 * first handed out had bin == NULL until tes_page_init's last store, after
 * its in_use store, so a concurrent walk could dereference NULL. Checked
 * both for a segment whose header past its first OS page was found zero
 * (fresh or purged to zero) and for one whose header was zeroed whole
 * (dirty, from the cache). */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>

static void check_fresh_pages(const char *what) {
#if !TES_SECURE
  tes_heap_t *heap = tes_tls_heap;
  REQUIRE(heap != NULL && !heap->is_static, "thread heap");
  int no_bin = 0, first = -1;
  for (int i = 0; i < 70; i++) { /* past one small segment: a second one is set up */
    tes_lock(&heap->purge_lock);
    tes_page_t *page = tes_segment_page_alloc(heap, TES_SEG_SMALL);
    tes_unlock(&heap->purge_lock);
    REQUIRE(page != NULL, "page");
    if (page->bin == NULL && no_bin++ == 0) first = page->index;
    tes_page_init(page, tes_segment_of(page), 0, 16);
    CHECK(page->bin == &tes_bin_closed, "%s: page %u in use without the closed bin", what, (unsigned)page->index);
    page->in_use = 1; /* stays: the thread's exit gives the segments back */
  }
  CHECK(no_bin == 0, "%s: %d of 70 pages handed out without a bin (the first: page %d)", what, no_bin, first);
#else
  (void)what;
#endif
}

static void *fresh_thread(void *arg) {
  void *p = tes_malloc(16); /* the thread's heap and first segment */
  check_fresh_pages((const char *)arg);
  tes_free(p);
  return NULL;
}

int main(void) {
  pthread_t t;
  /* A fresh process: new mappings, descriptors set up one by one. */
  REQUIRE(pthread_create(&t, NULL, fresh_thread, "lazy") == 0, "thread");
  pthread_join(t, NULL);
  /* Dirty segments from the cache (the first thread's, adopted and freed
   * by trim), their header zeroed whole. */
  tes_collect(false);
  REQUIRE(pthread_create(&t, NULL, fresh_thread, "whole") == 0, "thread");
  pthread_join(t, NULL);
  return unit_finish("unit_page_desc");
}
