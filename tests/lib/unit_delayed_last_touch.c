/* unit_delayed_last_touch.c — a remote free through the owner's delayed
 * list (src/free.c, delayed_push) touches the page once more after its
 * block is visible to the owner: the CAS that sets the page's word back
 * from FREEING to NORMAL. The owner must not free that block into its page
 * before that CAS has landed: the free may empty the page, which retires
 * at once (default build), and its segment may go to the cache and be
 * reused (a large block's data) or unmapped under the late CAS. TSan saw
 * the write land on a segment set up again (sanitize.lib_fc_sweep_stress,
 * docs/PERFORMANCE.md, tcm27); rev27 (docs/RELIABILITY.md) made
 * tes_heap_process_delayed wait for FREEING to clear, as
 * tes_page_set_delayed does.
 *
 * The test: a helper thread does a delayed remote free's first half by hand
 * (the page's word USE_DELAYED -> FREEING, the block's delayed mark, the
 * push onto the owner's delayed list), then holds its last CAS back until
 * the owner's tes_heap_process_delayed has returned, or a bounded number of
 * yields has passed (the fixed owner waits inside it for that CAS). Just
 * before the CAS it records whether the page is still in use. The block is
 * the only live one of its page, so the old owner freed it and retired the
 * page before the CAS ("the page had retired"); the fixed one cannot. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>

enum { YIELDS_BEFORE_CAS = 3000 };

static tes_page_t *page;
static tes_heap_t *owner;
static void *victim;
static _Atomic int pushed, owner_returned;
static int in_use_at_last_cas = -1;

static void *remote_freer(void *arg) {
  (void)arg;
  tes_block_t *block = victim;
  /* First half: what tes_free_remote and delayed_push do up to the push. */
  uintptr_t tf = atomic_load(&page->xthread_free);
  REQUIRE((tf & TES_TF_MASK) == TES_TF_USE_DELAYED, "the page's word is USE_DELAYED");
  REQUIRE(atomic_compare_exchange_strong(&page->xthread_free, &tf, (tf & ~TES_TF_MASK) | TES_TF_FREEING),
          "USE_DELAYED -> FREEING");
#if !TES_SECURE
  *tes_bin_mark(block) = tes_delayed_mark(page);
#endif
  tes_block_t *head = atomic_load(&owner->delayed_free);
  do {
    block->next = tes_delayed_encode(owner, head);
  } while (!atomic_compare_exchange_weak(&owner->delayed_free, &head, block));
  atomic_store(&pushed, 1);
  /* The last touch, held back. */
  for (int i = 0; i < YIELDS_BEFORE_CAS && !atomic_load(&owner_returned); i++) sched_yield();
  in_use_at_last_cas = tes_page_in_use_any_thread(page);
  tf = atomic_load(&page->xthread_free);
  while (!atomic_compare_exchange_weak(&page->xthread_free, &tf, (tf & ~TES_TF_MASK) | TES_TF_NORMAL)) {
  }
  return NULL;
}

int main(void) {
  /* Keeps the segment in use whatever happens to the victim's page. */
  void *keep = malloc(20000);
  REQUIRE(keep != NULL, "malloc");
  /* A block alone on a page that is neither its class queue's pinned head
   * nor full: a page of the first of many blocks (filled, then left), all
   * its other blocks freed and the thread's bin given back (collect). */
  enum { COUNT = 200 };
  static void *blocks[COUNT];
  for (int i = 0; i < COUNT; i++) REQUIRE((blocks[i] = malloc(12000)) != NULL, "malloc");
  victim = blocks[0];
  page = tes_page_of(tes_segment_of(victim), victim);
  for (int i = 1; i < COUNT; i++)
    if (tes_page_of(tes_segment_of(blocks[i]), blocks[i]) == page) free(blocks[i]), blocks[i] = NULL;
  tes_collect(true);
  REQUIRE(page->used == 1 && !page->pinned && !page->in_full,
          "the victim alone on an unpinned page (used %u, pinned %u, in_full %u)", (unsigned)page->used,
          (unsigned)page->pinned, (unsigned)page->in_full);
  owner = atomic_load(&page->heap);
  REQUIRE(owner == tes_tls_heap, "the block is the main thread's");
  REQUIRE(page->used == 1, "the victim is its page's only live block (used %u)", (unsigned)page->used);
  tes_page_set_delayed(page, TES_TF_USE_DELAYED); /* as a full page (page_to_full) */

  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, remote_freer, NULL) == 0, "pthread_create");
  while (!atomic_load(&pushed)) sched_yield();
  tes_heap_process_delayed(owner);
  atomic_store(&owner_returned, 1);
  pthread_join(t, NULL);

  CHECK(in_use_at_last_cas == 1,
        "the page had retired (in use: %d) before the remote freer's last CAS on it: the owner freed a delayed block "
        "without waiting for FREEING to clear",
        in_use_at_last_cas);
  CHECK(!tes_page_in_use_any_thread(page) || page->used == 0, "the victim was freed into its page");
  free(keep);
  for (int i = 1; i < COUNT; i++) free(blocks[i]);
  return unit_finish("unit_delayed_last_touch");
}
