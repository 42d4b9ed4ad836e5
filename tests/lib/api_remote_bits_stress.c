/* api_remote_bits_stress.c — the hardened build's remote-free bitmap
 * (RELIABILITY.md, twenty-fifth session, hrem25 and rev25) under a
 * producer/consumer load with thread churn.
 *
 *   api_remote_bits_stress [ROUNDS [BLOCKS]]
 *
 * Each round starts a producer thread that allocates BLOCKS blocks of a few
 * small classes and one medium class, writes each whole (its sequence
 * number, then a byte derived from it), and hands it to the one long-lived
 * consumer thread through a ring; the consumer checks every byte and frees
 * it (a remote free: a bit in the producer's page). In the first half of a
 * round the producer also frees a block of its own now and then; in the
 * second half it only allocates (its pages empty through the bits alone).
 * The producer exits at the end of its round while the consumer still
 * frees its blocks (frees into a heap being parked; the next round's
 * producer takes it over). What it catches:
 *   - a block handed out twice: two live copies, one writer overwrites the
 *     other's bytes (the consumer's check), or the hardened build's report
 *     of a double free at the second free (an abort);
 *   - a block lost for good, or a page that never empties: after each round,
 *     once the consumer has freed everything (a condition, not a clock),
 *     the committed memory must stay within a bound that a leak of a page
 *     a round or more would pass over the rounds (the working set is the
 *     ring: a few hundred KiB);
 *   - after the last round and tes_collect(true), the bytes in use must be
 *     those of the start.
 * tes_* calls only (also sanitize.lib_remote_bits_stress, under TSan).
 * Built with REMOTE_GAP against the fault-injection library, the remote
 * frees pause between their two steps (security.remote_bits_stress_gap). */
#define _GNU_SOURCE
#include "api_check.h"

#include "tessera.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef REMOTE_GAP
#include "fault.h"

#include <time.h>
/* The fault-injection build's hook between a remote free's summary bit and
 * its block's bit (src/free.c): one free in 16 sleeps there for 50 us, so
 * that the owner's collects often take a summary bit before its block's
 * bit is set (the late bits that wait for a later free or a look at every
 * word), which the plain run's scheduling almost never shows. */
static void remote_gap(void) {
  static atomic_uint calls;
  if (atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed) % 16 == 0)
    nanosleep(&(struct timespec){0, 50000}, NULL);
}
#endif

#define RING 512
#define OWN 64

typedef struct {
  unsigned char *p;
  size_t size;
  uint64_t seq;
} item_t;

static item_t ring[RING];
static atomic_size_t head, tail; /* producers write head, the consumer tail */
static atomic_bool finished;
static atomic_size_t wrong;
static size_t blocks_a_round = 20000;

/* 16-byte to 8 KiB small classes, and one medium class (12 KiB). */
static const size_t sizes[] = {16, 24, 48, 64, 96, 200, 512, 1000, 4000, 12000};
enum { SIZES = sizeof sizes / sizeof sizes[0] };

static unsigned char fill_of(uint64_t seq) { return (unsigned char)(seq * 131u + 7u); }

static void fill(unsigned char *p, size_t size, uint64_t seq) {
  memcpy(p, &seq, sizeof seq);
  memset(p + sizeof seq, fill_of(seq), size - sizeof seq);
}

static bool intact(const unsigned char *p, size_t size, uint64_t seq) {
  uint64_t got;
  memcpy(&got, p, sizeof got);
  if (got != seq) return false;
  unsigned char f = fill_of(seq);
  for (size_t i = sizeof seq; i < size; i++)
    if (p[i] != f) return false;
  return true;
}

static void *consumer(void *arg) {
  (void)arg;
  for (;;) {
    size_t at = atomic_load_explicit(&tail, memory_order_relaxed);
    while (atomic_load_explicit(&head, memory_order_acquire) == at) {
      if (atomic_load_explicit(&finished, memory_order_acquire) &&
          atomic_load_explicit(&head, memory_order_acquire) == at)
        return NULL;
      sched_yield();
    }
    item_t it = ring[at % RING];
    if (!intact(it.p, it.size, it.seq)) atomic_fetch_add(&wrong, 1);
    tes_free(it.p);
    atomic_store_explicit(&tail, at + 1, memory_order_release);
  }
}

static atomic_uint_fast64_t next_seq;

static void *producer(void *arg) {
  unsigned rng = (unsigned)(uintptr_t)arg * 2654435761u + 1;
  item_t own[OWN]; /* blocks this thread frees itself (first half) */
  size_t owned = 0;
  for (size_t i = 0; i < blocks_a_round; i++) {
    rng = rng * 1103515245u + 12345u;
    size_t size = sizes[(rng >> 16) % SIZES];
    uint64_t seq = atomic_fetch_add_explicit(&next_seq, 1, memory_order_relaxed);
    unsigned char *p = tes_malloc(size);
    if (p == NULL) {
      atomic_fetch_add(&wrong, 1);
      continue;
    }
    fill(p, size, seq);
    if (i < blocks_a_round / 2 && (rng >> 8) % 8 == 0) { /* kept a while, then freed here */
      if (owned == OWN) {
        size_t k = (rng >> 4) % OWN;
        if (!intact(own[k].p, own[k].size, own[k].seq)) atomic_fetch_add(&wrong, 1);
        tes_free(own[k].p);
        own[k] = own[--owned];
      }
      own[owned++] = (item_t){p, size, seq};
      continue;
    }
    if (i == blocks_a_round / 2) { /* from here on, no local frees */
      for (size_t k = 0; k < owned; k++) {
        if (!intact(own[k].p, own[k].size, own[k].seq)) atomic_fetch_add(&wrong, 1);
        tes_free(own[k].p);
      }
      owned = 0;
    }
    size_t at = atomic_load_explicit(&head, memory_order_relaxed);
    while (at - atomic_load_explicit(&tail, memory_order_acquire) >= RING) sched_yield();
    ring[at % RING] = (item_t){p, size, seq};
    atomic_store_explicit(&head, at + 1, memory_order_release);
  }
  for (size_t k = 0; k < owned; k++) tes_free(own[k].p);
  return NULL; /* exits with blocks still in the ring: freed into its parked heap */
}

static void *idle(void *arg) { return arg; }

int main(int argc, char **argv) {
  size_t rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 40;
  if (argc > 2) blocks_a_round = strtoul(argv[2], NULL, 10);
  API_GROUP("producer threads, one consumer: every block intact, memory bounded");
#ifdef REMOTE_GAP
  tes_fault_remote_gap = remote_gap;
#endif
  tes_free(tes_malloc(1));
  pthread_t t, c;
  /* Two threads at once started and joined first: what the C library
   * allocates for a thread (and keeps for the next ones) is live before the
   * first reading; the run has two threads at once, the consumer and a
   * producer. */
  REQUIRE(pthread_create(&t, NULL, idle, NULL) == 0, "pthread_create");
  REQUIRE(pthread_create(&c, NULL, idle, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  pthread_join(c, NULL);
  tes_collect(true);
  tes_stats_t s0, s;
  tes_stats_get(&s0);
  REQUIRE(pthread_create(&c, NULL, consumer, NULL) == 0, "pthread_create");
  int64_t worst = 0;
  for (size_t r = 0; r < rounds; r++) {
    REQUIRE(pthread_create(&t, NULL, producer, (void *)(uintptr_t)(r + 1)) == 0, "pthread_create");
    pthread_join(t, NULL);
    /* Settled: every block of the round freed by the consumer. */
    while (atomic_load_explicit(&tail, memory_order_acquire) != atomic_load_explicit(&head, memory_order_acquire))
      sched_yield();
    tes_stats_get(&s);
    int64_t grown = s.committed.current - s0.committed.current;
    if (grown > worst) worst = grown;
    /* 48 MiB: several times what a round holds at once (a ring of blocks
     * up to 12 KiB, the pages a producer touches, the caches); the rounds
     * allocate 20,000 blocks of 2 KiB on average each, so a page lost a
     * round takes the committed memory past it well before the end. */
    CHECK(grown <= 48 << 20, "round %zu: %lld KiB committed above the start", r,
          (long long)(grown >> 10));
    if (api_failures) break;
  }
  atomic_store_explicit(&finished, true, memory_order_release);
  pthread_join(c, NULL);
  CHECK(atomic_load(&wrong) == 0, "%zu blocks changed between their malloc and their free", atomic_load(&wrong));

  API_GROUP("every block comes back");
  tes_collect(true);
  tes_stats_get(&s);
  CHECK(s.in_use.current == s0.in_use.current, "in use %lld before, %lld after", (long long)s0.in_use.current,
        (long long)s.in_use.current);
  printf("%zu rounds of %zu blocks: at most %lld KiB committed above the start after a round\n", rounds,
         blocks_a_round, (long long)(worst >> 10));
  return api_finish("api_remote_bits_stress");
}
