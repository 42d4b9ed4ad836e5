/* api_remote_extend_race.c — another thread frees a thread's blocks while
 * the owner carves more of the same pages. The owner allocates blocks of a
 * few small classes, keeps two of every three and hands the third to a
 * second thread through a ring, which frees it (a remote free). Meanwhile the owner's next allocations
 * carve new blocks of the same page (tes_page_extend raises its
 * `capacity`), and the hardened build's remote free reads `capacity` for
 * its block test: without an atomic access on both sides, a data race that
 * ThreadSanitizer reports (sanitize.lib_remote_extend_race, the hardened
 * library). In the main build (lib.api_remote_extend_race.secure) it checks
 * that every block comes back whole and that no block is lost: live bytes
 * back at the start once everything is freed and collected. tes_* calls only. */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define RING 256
#define BLOCKS 100000

static void *_Atomic ring[RING];
static atomic_size_t head, tail; /* owner writes head, freer writes tail */
static atomic_int wrong;

static const size_t sizes[] = {16, 48, 96, 200};

static void *freer(void *arg) {
  (void)arg;
  for (size_t done = 0; done < BLOCKS; done++) {
    size_t at = atomic_load_explicit(&tail, memory_order_relaxed);
    while (atomic_load_explicit(&head, memory_order_acquire) == at) sched_yield();
    unsigned char *p = atomic_load_explicit(&ring[at % RING], memory_order_relaxed);
    if (p[0] != (unsigned char)(uintptr_t)p) atomic_fetch_add(&wrong, 1);
    tes_free(p);
    atomic_store_explicit(&tail, at + 1, memory_order_release);
  }
  return NULL;
}

static void *idle(void *arg) { return arg; }

int main(void) {
  API_GROUP("remote frees while the owner carves the same pages");
  tes_free(tes_malloc(1));
  pthread_t t;
  /* A thread started and joined first: what the C library allocates for a
   * thread (and keeps for the next one) is live before the first reading. */
  REQUIRE(pthread_create(&t, NULL, idle, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  tes_collect(true);
  tes_stats_t s0, s1;
  tes_stats_get(&s0);
  REQUIRE(pthread_create(&t, NULL, freer, NULL) == 0, "pthread_create");
  /* The owner keeps two blocks of every three: its pages fill up, and keep
   * being carved, while the freer frees the third (a freed block the owner
   * would take back instead of carving a new one). */
  static unsigned char *kept[2 * BLOCKS];
  size_t kept_count = 0;
  for (size_t i = 0; i < BLOCKS; i++) {
    for (int k = 0; k < 2; k++) {
      kept[kept_count] = tes_malloc(sizes[(i + k) % 4]);
      REQUIRE(kept[kept_count] != NULL, "tes_malloc");
      kept_count++;
    }
    unsigned char *p = tes_malloc(sizes[i % 4]);
    REQUIRE(p != NULL, "tes_malloc");
    p[0] = (unsigned char)(uintptr_t)p;
    size_t at = atomic_load_explicit(&head, memory_order_relaxed);
    while (at - atomic_load_explicit(&tail, memory_order_acquire) >= RING) sched_yield();
    atomic_store_explicit(&ring[at % RING], p, memory_order_relaxed);
    atomic_store_explicit(&head, at + 1, memory_order_release);
  }
  pthread_join(t, NULL);
  for (size_t i = 0; i < kept_count; i++) tes_free(kept[i]);
  CHECK(atomic_load(&wrong) == 0, "%d blocks changed between the owner and the freer", atomic_load(&wrong));

  API_GROUP("every block comes back");
  tes_collect(true);
  tes_stats_get(&s1);
  CHECK(s1.in_use.current == s0.in_use.current, "in use %lld before, %lld after",
        (long long)s0.in_use.current, (long long)s1.in_use.current);
  return api_finish("api_remote_extend_race");
}
