/* unit_slice_bin.c — the slice table's copy of each page's bin (default
 * build, src/internal.h tes_slices_t.entry[].bin): the free fast path
 * pushes to slices->entry[slot].bin, not to page->bin, so for every slot
 * whose tag is set the two must agree, through fresh pages (small and medium, whose pages
 * span eight slices), a first-class heap's pages (which share the thread's
 * table but have their own bins), pages re-entered after a collision, and
 * pages of an exited thread's segment adopted by another heap. A stale copy
 * (the page's slices are entered before its heap's bin is set) sent every
 * free of a fresh page to tes_bin_closed, past the bins; one naming another
 * heap's bin would push blocks into it. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>

#if TES_SECURE
int main(void) {
  puts("unit_slice_bin: hardened build has no bins");
  return 77;
}
#else

/* Every set slot: the copy is the page's bin. Returns the slots checked. */
static size_t check_table(const char *when) {
  const tes_slices_t *slices = tes_tls_slices;
  size_t checked = 0, bad = 0;
  for (size_t i = 0; i < TES_SLICE_SLOTS; i++) {
    uintptr_t tag = slices->tag[i];
    if (tag == 0 || tag == UINTPTR_MAX) continue;
    checked++;
    if (slices->entry[i].bin != slices->entry[i].page->bin) bad++;
  }
  CHECK(bad == 0, "%s: %zu of %zu set slots hold a bin other than their page's", when, bad, checked);
  return checked;
}

/* A free through the fast path lands in the bin the page names (the block
 * becomes the bin's head), not on the page's list. */
static void check_free_to_bin(void *p, const char *when) {
  size_t slot;
  REQUIRE(tes_slice_hit(tes_tls_slices, p, &slot), "%s: block not in the table", when);
  tes_page_t *page = tes_tls_slices->entry[slot].page;
  tes_bin_t *bin = page->bin;
  CHECK(bin != &tes_bin_closed, "%s: a page in use names the closed bin", when);
  /* A full bin (room 0) sends the block to its page: make room. */
  void *room = tes_bin_room(bin) == 0 ? malloc(page->block_size) : NULL;
  free(p);
  CHECK(bin->head == (tes_block_t *)p, "%s: the block did not go to its page's bin", when);
  free(room);
}

enum { COUNT = 3000 };
static void *blocks[COUNT];
static const size_t sizes[] = {16, 48, 256, 1000, 2000, 9000, 100000};

static void *leave_blocks(void *arg) {
  (void)arg;
  for (int i = 0; i < COUNT; i++) blocks[i] = malloc(sizes[i % 7] / 4 + 16);
  return NULL; /* exits with them live: its segments are abandoned */
}

int main(void) {
  /* Fresh pages of small and medium classes, then half of them freed. */
  static void *mine[COUNT];
  for (int i = 0; i < COUNT; i++) REQUIRE((mine[i] = malloc(sizes[i % 7])) != NULL, "malloc");
  CHECK(check_table("fresh pages") > 0, "no slot set");
  check_free_to_bin(mine[COUNT - 1], "a fresh page's block");
  mine[COUNT - 1] = NULL;
  for (int i = 0; i < COUNT; i += 2) free(mine[i]), mine[i] = NULL;
  check_table("after frees");

  /* A first-class heap: its pages go into this thread's table, with its bins. */
  tes_heap_t *h = tes_heap_new();
  REQUIRE(h != NULL, "tes_heap_new");
  void *fc[64];
  for (int i = 0; i < 64; i++) REQUIRE((fc[i] = tes_heap_malloc(h, sizes[i % 7])) != NULL, "tes_heap_malloc");
  check_table("first-class heap's pages");
  size_t slot;
  REQUIRE(tes_slice_hit(tes_tls_slices, fc[0], &slot), "first-class block not in the table");
  CHECK(tes_tls_slices->entry[slot].bin == &h->bins[tes_tls_slices->entry[slot].page->class_index],
        "first-class page's slot does not name that heap's bin");
  check_free_to_bin(fc[63], "a first-class heap's block");
  for (int i = 0; i < 63; i++) free(fc[i]);
  tes_heap_destroy(h);
  check_table("first-class heap destroyed");

  /* A slot taken over by a collision and entered again by a free of the
   * page that lost it (free.c): the copy follows. */
  REQUIRE(tes_slice_hit(tes_tls_slices, mine[1], &slot), "block not in the table");
  tes_tls_slices->entry[slot].bin = NULL;
  tes_tls_slices->tag[slot] = UINTPTR_MAX;
  void *lost = mine[1];
  free(lost); /* misses, re-enters the slice */
  mine[1] = NULL;
  CHECK(tes_slice_hit(tes_tls_slices, lost, &slot), "slice not re-entered by the free");
  check_table("slice re-entered");

  /* An exited thread's segments, adopted by this heap (every eighth slow
   * path adopts one): their pages' slots name this heap's bins. */
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, leave_blocks, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  static void *churn[20000];
  for (int i = 0; i < 20000; i++) churn[i] = malloc(16 + (size_t)(i % 64) * 16);
  for (int i = 0; i < 20000; i++) free(churn[i]);
  check_table("after adoption");
  size_t adopted = 0;
  for (int i = 0; i < COUNT; i++) {
    if (!tes_slice_hit(tes_tls_slices, blocks[i], &slot)) continue;
    if (adopted++ == 0) check_free_to_bin(blocks[i], "an adopted page's block");
    else free(blocks[i]);
    blocks[i] = NULL;
  }
  CHECK(adopted > 0, "no segment of the exited thread was adopted");
  for (int i = 0; i < COUNT; i++) free(blocks[i]);
  for (int i = 0; i < COUNT; i++) free(mine[i]);
  check_table("at the end");
  return unit_finish("unit_slice_bin");
}
#endif
