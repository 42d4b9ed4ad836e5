/* api_bins_park_stress.c — the twenty-first session's merges together
 * (review21): bins that grow (bin_grow) in short-lived threads whose heaps
 * are parked with grown, full bins (bin_park, bin_flush_to) and taken over
 * by the next generation, while two freers free the workers' blocks as
 * remote frees (into pages of heaps being parked, parked, or adopted) and
 * flip TESSERA_BINS at run time (tes_option_set). Four threads at a time.
 *
 * Every block carries its own address and a fill, verified before each
 * free: a block handed out twice shows up as a broken fill. At the end,
 * every thread stopped and the table emptied, a forced collect must bring
 * in_use back to where it started: a block left on no list (a leak, as the
 * park's 36 of a grown bin of 100 were) keeps counting there. */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <pthread.h>
#include <stdatomic.h>

#define SLOTS 2048
#define GENERATIONS 40
#define WORKERS 2
static _Atomic(uint64_t *) table[SLOTS];
static atomic_int stop;
static atomic_long broken;

static const size_t sizes[] = {16, 48, 112, 1024, 3000, 8192, 24576};

static uint64_t *make(size_t size) {
  uint64_t *b = malloc(size);
  if (b == NULL) return NULL;
  size_t words = size / 8;
  b[0] = (uint64_t)(uintptr_t)b;
  b[1] = words;
  for (size_t i = 2; i < words; i++) b[i] = (uint64_t)(uintptr_t)b ^ i;
  return b;
}

static void drop(uint64_t *b) {
  if (b == NULL) return;
  size_t words = b[1];
  bool ok = b[0] == (uint64_t)(uintptr_t)b && words >= 2 && words <= 24576 / 8;
  for (size_t i = 2; ok && i < words; i++) ok = b[i] == ((uint64_t)(uintptr_t)b ^ i);
  if (!ok) atomic_fetch_add(&broken, 1);
  b[0] = 0;
  free(b);
}

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A worker: rounds of "malloc n, free them all, malloc n again" of one class
 * (n past the bin's limit: the bin grows), blocks into the table (the
 * freers free them remotely), and it exits with a grown bin full. */
static void *worker(void *arg) {
  uint64_t seed = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
  static __thread uint64_t *burst[300];
  for (int round = 0; round < 12; round++) {
    size_t size = sizes[next_random(&seed) % (sizeof sizes / sizeof sizes[0])];
    unsigned n = size <= 1024 ? 300 : size <= 8192 ? 120 : 50;
    for (int rep = 0; rep < 4; rep++) {
      for (unsigned i = 0; i < n; i++) burst[i] = make(size);
      for (unsigned i = 0; i < n; i++) {
        if (i % 5 == 0) { /* some to the table: their frees are remote */
          uint64_t *old = atomic_exchange(&table[next_random(&seed) % SLOTS], burst[i]);
          drop(old);
        } else {
          drop(burst[i]);
        }
      }
    }
  }
  /* Exit with full bins, grown ones among them. */
  size_t size = sizes[next_random(&seed) % 3];
  for (int rep = 0; rep < 3; rep++) {
    for (unsigned i = 0; i < 250; i++) burst[i] = make(size);
    for (unsigned i = 0; i < 250; i++) {
      if (i % 3 == 0) drop(atomic_exchange(&table[next_random(&seed) % SLOTS], burst[i]));
      else drop(burst[i]);
    }
  }
  for (unsigned i = 0; i < 200; i++) burst[i] = make(size);
  for (unsigned i = 0; i < 200; i++) drop(burst[i]);
  return NULL;
}

static void *freer(void *arg) {
  uint64_t seed = (uintptr_t)arg * 0x2545f4914f6cdd1dull + 7;
  unsigned long n = 0;
  while (!atomic_load(&stop)) {
    drop(atomic_exchange(&table[next_random(&seed) % SLOTS], NULL));
    if (++n % 4096 == 0 && (uintptr_t)arg == 1) tes_option_set(TES_OPTION_BINS, (long)(next_random(&seed) & 1));
  }
  return NULL;
}

static void *idle(void *arg) { return arg; }

static int64_t in_use_now(void) {
  tes_stats_t st;
  tes_stats_get(&st);
  return st.in_use.current;
}

int main(void) {
  if (!api_allocator_is_tessera()) return 77;
  /* glibc keeps exited threads' stacks, and their TLS blocks (malloc'd),
   * for the next threads: made before the baseline. */
  for (int round = 0; round < 2; round++) {
    pthread_t t[WORKERS + 2];
    for (int i = 0; i < WORKERS + 2; i++) pthread_create(&t[i], NULL, idle, NULL);
    for (int i = 0; i < WORKERS + 2; i++) pthread_join(t[i], NULL);
  }
  tes_collect(true);
  int64_t base = in_use_now();
  pthread_t freers[2];
  for (uintptr_t i = 0; i < 2; i++) pthread_create(&freers[i], NULL, freer, (void *)(i + 1));
  for (int g = 0; g < GENERATIONS; g++) {
    pthread_t w[WORKERS];
    for (int i = 0; i < WORKERS; i++) pthread_create(&w[i], NULL, worker, (void *)(uintptr_t)(g * WORKERS + i + 1));
    for (int i = 0; i < WORKERS; i++) pthread_join(w[i], NULL);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++) pthread_join(freers[i], NULL);
  tes_option_set(TES_OPTION_BINS, 1);
  for (unsigned i = 0; i < SLOTS; i++) drop(atomic_exchange(&table[i], NULL));
  API_GROUP("grown bins parked, adopted and freed into");
  CHECK(atomic_load(&broken) == 0, "%ld blocks found broken before their free", atomic_load(&broken));
  tes_collect(true);
  int64_t after = in_use_now();
  if (!tes_option_get(TES_OPTION_SECURE))
    CHECK(after == base, "in_use %lld bytes before, %lld after every block was freed (blocks on no list)",
          (long long)base, (long long)after);
  return api_finish("api_bins_park_stress");
}
