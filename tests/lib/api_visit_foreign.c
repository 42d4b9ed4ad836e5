/* api_visit_foreign.c — tes_heap_visit of a heap of another thread while
 * that thread allocates from it, frees and collects. The walk followed the
 * heap's segment list unlocked, as for the caller's own heap, and the
 * owner unmapped segments under it (SIGSEGV; with the segment cache off
 * every emptied segment is unmapped at once). Now such a walk goes over
 * every segment under the segments lock, as the walk of every heap does.
 * Checked too: every block the walk reports is one of the owner's heap
 * (its usable size one the owner asks for), and stopping the walk works.
 * The owner writes the first word of every block (over the link a walk may
 * be following). In the TSan tree (sanitize.lib_visit_foreign{,_secure})
 * the walk's reads of the pages and lists the owner changes were reported
 * as races (visit_page against tes_page_take, tes_page_extend,
 * tes_page_init, bin_flush...): they are a snapshot now (src/heap_visit.c,
 * page_snapshot), and the rest of the walk is clean. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define BLOCKS 20000
#define SECONDS 2.0
/* The walks go on past SECONDS until the owner has finished a few rounds
 * and some walk saw blocks and was stopped by its visitor: on a loaded
 * machine the owner can be starved for the whole 2 s (seen once at load
 * 20: 281,351 walks, 0 blocks). Only this long without that fails. */
#define OWNER_ROUNDS 3
#define GIVE_UP_SECONDS 120.0

static tes_heap_t *_Atomic owned;
static atomic_bool stop;
static atomic_size_t owner_rounds;
static void *blocks[BLOCKS];

static size_t block_size(int i) { return 64 + (size_t)(i % 8) * 100; }

static void *owner(void *arg) {
  (void)arg;
  tes_heap_t *h = tes_heap_new();
  if (h == NULL) abort();
  atomic_store(&owned, h);
  while (!atomic_load(&stop)) {
    for (int i = 0; i < BLOCKS; i++) {
      blocks[i] = tes_heap_malloc(h, block_size(i));
      if (blocks[i] == NULL) abort();
      *(size_t *)blocks[i] = (size_t)i; /* the program's data over the link the walk may be following */
    }
    for (int i = 0; i < BLOCKS; i++) tes_free(blocks[i]);
    tes_collect(true); /* the emptied segments go back (unmapped: no cache) */
    atomic_fetch_add(&owner_rounds, 1);
  }
  tes_heap_destroy(h);
  return NULL;
}

typedef struct walk_s {
  const tes_heap_t *heap;
  size_t blocks, foreign, odd_size, stop_after;
} walk_t;

static bool visit(const tes_block_info_t *block, void *arg) {
  walk_t *w = arg;
  w->blocks++;
  if (block->heap != w->heap) w->foreign++;
  /* Usable sizes are class sizes: at least the size asked, less than twice it. */
  if (block->usable_size < 64 || block->usable_size >= 2 * (64 + 7 * 100)) w->odd_size++;
  return w->stop_after == 0 || w->blocks < w->stop_after;
}

int main(void) {
  API_GROUP("walks of another thread's heap while it frees its segments");
  REQUIRE(tes_option_set(TES_OPTION_SEGMENT_CACHE, 0) == 0, "segment cache off");
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, owner, NULL) == 0, "pthread_create");
  while (atomic_load(&owned) == NULL) api_sleep_ms(1);
  tes_heap_t *h = atomic_load(&owned);
  size_t walks = 0, seen = 0, stopped_early = 0;
  double start = api_now_seconds();
  for (;;) {
    double now = api_now_seconds();
    bool enough = atomic_load(&owner_rounds) >= OWNER_ROUNDS && seen > 0 && stopped_early > 0;
    if ((now >= start + SECONDS && enough) || now >= start + GIVE_UP_SECONDS) break;
    walk_t w = {h, 0, 0, 0, walks % 4 == 3 ? 10 : 0};
    tes_heap_visit(h, visit, &w);
    CHECK(w.foreign == 0, "%zu blocks of another heap reported", w.foreign);
    CHECK(w.odd_size == 0, "%zu blocks of a size the owner never asked for", w.odd_size);
    if (w.stop_after != 0) {
      CHECK(w.blocks <= w.stop_after, "the walk went on after the visitor stopped it: %zu blocks", w.blocks);
      stopped_early += w.blocks == w.stop_after;
    }
    seen += w.blocks;
    walks++;
  }
  atomic_store(&stop, true);
  pthread_join(t, NULL);
  CHECK(walks > 0 && seen > 0, "%zu walks saw %zu blocks", walks, seen);
  CHECK(atomic_load(&owner_rounds) >= OWNER_ROUNDS, "the owner finished %zu rounds", atomic_load(&owner_rounds));
  CHECK(stopped_early > 0, "no walk was stopped by its visitor (%zu walks)", walks);
  printf("%zu walks, %zu blocks seen, %zu owner rounds\n", walks, seen, atomic_load(&owner_rounds));
  return api_finish("api_visit_foreign");
}
