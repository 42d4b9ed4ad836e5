/* api_fc_sweep_stress.c — the fifteenth session's changes together, checked
 * for lost or damaged blocks and false reports: an owner thread allocates
 * from its default heap and from first-class heaps, in classes it starts
 * and stops using (idle class heads retire at the second sweep), and hands
 * blocks to freeing threads (remote frees into full pages: the delayed
 * list, whose links the hardened build checks) while it calls tes_collect
 * (which also collects its first-class heaps) and another thread deletes
 * or destroys some of those heaps. Every live block keeps its fill. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define HEAPS 4
#define RING 4096
#define ROUNDS 60
#define PER_ROUND 3000

static const size_t sizes[] = {16, 48, 256, 1000, 3000, 9000, 20000, 60000};
#define NSIZES (sizeof sizes / sizeof sizes[0])

typedef struct {
  void *p;
  size_t size;
  unsigned char fill;
  tes_heap_t *heap; /* the first-class heap it came from, or NULL */
} item_t;

/* The owner hands blocks to the freers through a bounded queue whose slots
 * carry a sequence number (slot i of lap L: L * RING + i while empty,
 * L * RING + i + 1 once filled): a freer reads a slot's item only after the
 * owner's release store of its sequence, and the owner writes the slot
 * again only after that freer's release store that gives it back. Before,
 * a freer claimed slot t by advancing ring_tail and only then copied it,
 * so the owner, seeing room, could refill the slot under the copy (TSan:
 * data race on `ring`, sanitize.tsan). ring_freed counts the blocks freed,
 * not just claimed: the drain before a destroy waits for it. */
typedef struct {
  item_t item;
  _Atomic unsigned seq;
} slot_t;
static slot_t ring[RING];
static _Atomic unsigned ring_head, ring_tail, ring_freed;
static _Atomic int done;
static _Atomic(tes_heap_t *) to_delete[ROUNDS];
static _Atomic int delete_count;
static _Atomic long bad;

static bool fill_ok(const item_t *it) {
  const unsigned char *b = it->p;
  for (size_t i = 0; i < it->size; i += 61)
    if (b[i] != it->fill) return false;
  return b[it->size - 1] == it->fill;
}

static void *freer(void *arg) {
  (void)arg;
  for (;;) {
    int finished = atomic_load(&done); /* before the look: every hand-off came before it */
    unsigned t = atomic_load(&ring_tail);
    slot_t *slot = &ring[t % RING];
    unsigned seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
    if (seq != t + 1) { /* empty (seq == t), or t is stale */
      if (seq == t && finished) break;
      sched_yield();
      continue;
    }
    if (!atomic_compare_exchange_weak(&ring_tail, &t, t + 1)) continue;
    item_t it = slot->item;
    atomic_store_explicit(&slot->seq, t + RING, memory_order_release); /* the owner's again */
    if (!fill_ok(&it)) atomic_fetch_add(&bad, 1);
    tes_free(it.p);
    atomic_fetch_add(&ring_freed, 1);
  }
  return NULL;
}

static void *deleter(void *arg) {
  (void)arg;
  int seen = 0;
  while (!atomic_load(&done) || seen < atomic_load(&delete_count)) {
    if (seen < atomic_load(&delete_count)) {
      tes_heap_t *h = atomic_load(&to_delete[seen]);
      if (seen & 1) tes_heap_destroy(h);
      else tes_heap_delete(h);
      seen++;
    } else {
      tes_collect(seen & 1);
      sched_yield();
    }
  }
  return NULL;
}

static void hand_off(void *p, size_t size, unsigned char fill) {
  unsigned h = atomic_load(&ring_head); /* only this thread stores it */
  slot_t *slot = &ring[h % RING];
  while (atomic_load_explicit(&slot->seq, memory_order_acquire) != h) sched_yield(); /* its freer done with it */
  slot->item = (item_t){p, size, fill, NULL};
  atomic_store_explicit(&slot->seq, h + 1, memory_order_release);
  atomic_store(&ring_head, h + 1);
}

#define KEEP 2000
static item_t kept[KEEP];

int main(void) {
  API_GROUP("first-class heaps, idle class heads, remote frees and collects together");
  pthread_t freers[2], del;
  for (unsigned i = 0; i < RING; i++) atomic_init(&ring[i].seq, i);
  for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&freers[i], NULL, freer, NULL) == 0, "pthread_create");
  REQUIRE(pthread_create(&del, NULL, deleter, NULL) == 0, "pthread_create");
  tes_heap_t *heaps[HEAPS + 1] = {NULL};
  for (int h = 1; h <= HEAPS; h++) heaps[h] = tes_heap_new();
  unsigned seed = 12345;
  for (int i = 0; i < KEEP; i++) kept[i].p = NULL;
  for (int round = 0; round < ROUNDS; round++) {
    /* A window of classes in use this round: the others go idle. */
    unsigned lo = (unsigned)round % NSIZES, span = 1 + (unsigned)round % 3;
    for (int i = 0; i < PER_ROUND; i++) {
      seed = seed * 1103515245u + 12345u;
      size_t size = sizes[(lo + (seed >> 8) % span) % NSIZES] - (seed >> 20) % 8;
      int hi = (int)((seed >> 4) % (HEAPS + 1));
      void *p = hi == 0 ? tes_malloc(size) : tes_heap_malloc(heaps[hi], size);
      REQUIRE(p != NULL, "malloc");
      unsigned char fill = (unsigned char)(seed >> 13);
      memset(p, fill, size);
      unsigned k = (seed >> 16) % KEEP;
      if ((seed >> 3) & 1) {
        hand_off(p, size, fill);
      } else {
        if (kept[k].p != NULL) {
          if (!fill_ok(&kept[k])) atomic_fetch_add(&bad, 1);
          tes_free(kept[k].p);
        }
        kept[k] = (item_t){p, size, fill, hi == 0 ? NULL : heaps[hi]};
      }
      if (i % 500 == 0) tes_collect(((seed >> 5) & 3) == 0);
    }
    /* Sweeps need time to pass: a purge delay. */
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (round % 10 == 9) {
      /* One first-class heap goes to another thread for deletion; its
       * blocks in `kept` stay valid (delete) or die with it (destroy). */
      int victim = 1 + (round / 10) % HEAPS;
      int n = atomic_load(&delete_count);
      if (n & 1) {
        /* destroy: drop the kept blocks of that heap first */
        for (int k = 0; k < KEEP; k++) {
          if (kept[k].p == NULL) continue;
          if (kept[k].heap == heaps[victim]) kept[k].p = NULL; /* dies with the heap */
        }
      }
      /* A heap to destroy may still have blocks in the ring: let it drain,
       * every block freed, not only claimed by a freer (a deleted heap's
       * blocks stay valid: freed remotely meanwhile). */
      if (n & 1)
        while (atomic_load(&ring_freed) != atomic_load(&ring_head)) sched_yield();
      atomic_store(&to_delete[n], heaps[victim]);
      atomic_store(&delete_count, n + 1);
      heaps[victim] = tes_heap_new();
      REQUIRE(heaps[victim] != NULL, "tes_heap_new");
    }
  }
  atomic_store(&done, 1);
  for (int i = 0; i < 2; i++) pthread_join(freers[i], NULL);
  pthread_join(del, NULL);
  for (int k = 0; k < KEEP; k++) {
    if (kept[k].p == NULL) continue;
    if (!fill_ok(&kept[k])) atomic_fetch_add(&bad, 1);
    tes_free(kept[k].p);
  }
  tes_collect(true);
  CHECK(atomic_load(&bad) == 0, "%ld blocks lost their fill", (long)atomic_load(&bad));
  for (int h = 1; h <= HEAPS; h++) tes_heap_destroy(heaps[h]);
  return api_finish("api_fc_sweep_stress");
}
