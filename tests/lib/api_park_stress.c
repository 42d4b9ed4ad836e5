/* api_park_stress.c — parked heaps (tes_heap_park) under remote frees,
 * forced collects, statistics and fork, black-box.
 *
 * Generations of short-lived workers share one table of blocks with two
 * long-lived freers. A worker puts fresh blocks into random slots (freeing
 * the block it replaces, mostly another thread's) and exits with its blocks
 * still in the table: its heap is parked (TESSERA_HEAP_PARK, default 1),
 * and the freers, which keep taking slots, free into its pages as remote
 * frees while it waits, while the next generation takes it over, and while
 * a third thread reads the statistics (tes_stats_get walks every heap's
 * pages) and, every other generation, runs malloc_trim (tes_collect(true)),
 * which abandons the parked heaps under them. Every block carries a check word and a fill
 * pattern, verified before each free: a block handed out twice, or a page
 * retired or purged with a live block in it, shows up as a broken pattern.
 *
 * Between generations, with every other thread stopped, the statistics are
 * checked against the table: in_use grew by the usable bytes of the blocks
 * in it, and the live blocks of each class are the table's. A parked heap's
 * pages and its delayed list must be counted once.
 *
 * With "fork" as the argument, some generations fork while the workers and
 * the statistics' reader run (the freers paused): the child, whose parent has parked heaps, starts threads
 * of its own (they take those heaps), verifies and frees every block of the
 * table, and checks the statistics again.
 *
 * The statistics' reader found tes_stats_get following a link read from a
 * block handed out meanwhile to an address that was no block start (UBSan:
 * misaligned load; stats.c, bounded_count).
 *
 * Linked with libtessera; the sanitizer trees (tests/sanitize) build it
 * with TES_API_ONLY, where the same calls go through tes_* and the
 * sanitizer keeps malloc. */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#ifdef TES_API_ONLY
#define MALLOC tes_malloc
#define FREE tes_free
#define USABLE tes_usable_size
#define TRIM() tes_collect(true)
#else
#include <malloc.h>
#define MALLOC malloc
#define FREE free
#define USABLE malloc_usable_size
#define TRIM() malloc_trim(0)
#endif

enum { SLOTS = 4096, WORKERS = 3, FREERS = 2, GENERATIONS = 16, STEPS = 6000 };

typedef struct {
  uint64_t check; /* the block's address xor its size */
  size_t size;
} header_t;

static _Atomic(header_t *) table[SLOTS];
static _Atomic int failures_mt;
static _Atomic int stop_freers, freers_pause, freers_paused, stop_trimmer;

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static size_t pick_size(uint64_t *s) {
  uint64_t r = rnd(s) % 100;
  if (r < 70) return sizeof(header_t) + rnd(s) % 240;  /* small */
  if (r < 97) return 1024 + rnd(s) % 30000;            /* medium */
  return 200000 + rnd(s) % 300000;                    /* large */
}

static unsigned char fill_of(const header_t *h) { return (unsigned char)(((uintptr_t)h >> 4) ^ h->size); }

static header_t *make_block(uint64_t *s) {
  size_t size = pick_size(s);
  header_t *h = MALLOC(size);
  if (h == NULL) return NULL;
  h->size = size;
  h->check = (uint64_t)(uintptr_t)h ^ size;
  memset(h + 1, fill_of(h), size - sizeof *h);
  return h;
}

static bool block_ok(const header_t *h) {
  if (h->check != ((uint64_t)(uintptr_t)h ^ h->size)) return false;
  const unsigned char *p = (const unsigned char *)(h + 1), f = fill_of(h);
  /* The first and last 64 bytes and a few in between: enough for a block
   * handed out twice, cheap enough for many iterations. */
  size_t n = h->size - sizeof *h;
  for (size_t i = 0; i < n; i += (i < 64 || i + 64 >= n) ? 1 : 997)
    if (p[i] != f) return false;
  return true;
}

static void drop(header_t *h) {
  if (h == NULL) return;
  if (!block_ok(h)) {
    fprintf(stderr, "block %p (size %zu) damaged while live\n", (void *)h, h->size);
    atomic_fetch_add(&failures_mt, 1);
    return; /* leave it: freeing a damaged block may crash the report */
  }
  FREE(h);
}

static void *worker(void *arg) {
  uint64_t s = (uintptr_t)arg * 0x9E3779B97F4A7C15ull | 1;
  for (int i = 0; i < STEPS; i++) {
    unsigned slot = (unsigned)(rnd(&s) % SLOTS);
    header_t *h = rnd(&s) % 8 ? make_block(&s) : NULL;
    drop(atomic_exchange(&table[slot], h));
  }
  return NULL;
}

static void *freer(void *arg) {
  uint64_t s = (uintptr_t)arg * 0xD1B54A32D192ED03ull | 1;
  while (!atomic_load(&stop_freers)) {
    if (atomic_load(&freers_pause)) {
      atomic_fetch_add(&freers_paused, 1);
      while (atomic_load(&freers_pause)) sched_yield();
      atomic_fetch_sub(&freers_paused, 1);
      continue;
    }
    unsigned slot = (unsigned)(rnd(&s) % SLOTS);
    /* Mostly frees (remote, into workers' parked or live pages), now and
     * then a block of our own (our heap stays live all along). */
    header_t *h = rnd(&s) % 4 == 0 ? make_block(&s) : NULL;
    drop(atomic_exchange(&table[slot], h));
  }
  return NULL;
}

/* arg non-NULL: forced collects too, else the statistics alone (parked
 * heaps then wait for their purge delay or a new thread). */
static void *trimmer(void *arg) {
  while (!atomic_load(&stop_trimmer)) {
    if (arg != NULL) TRIM();
#ifndef __SANITIZE_THREAD__
    /* Walks every heap, parked ones too, while they change hands. Not
     * under TSan: the statistics read other threads' pages unordered by
     * design (stats.c, bounded_count), which TSan reports. */
    tes_stats_t st;
    for (int i = 0; i < 10; i++) tes_stats_get(&st);
#endif
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* Every thread on a small stack: glibc caches exited threads' stacks (40 MiB
 * worth) with the memory it allocated for them (their TLS vectors), so with
 * 8 MiB stacks that memory came and went with the mix of threads and the
 * statistics could not be compared exactly. */
static void spawn(pthread_t *t, void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 << 10);
  REQUIRE(pthread_create(t, &attr, fn, arg) == 0, "pthread_create");
  pthread_attr_destroy(&attr);
}

static void pause_freers(void) {
  atomic_store(&freers_pause, 1);
  while (atomic_load(&freers_paused) < FREERS) sched_yield();
}
static void resume_freers(void) { atomic_store(&freers_pause, 0); }

/* The table's blocks: checked, and their usable bytes. */
static int64_t table_usable(const char *when) {
  int64_t usable = 0;
  for (unsigned i = 0; i < SLOTS; i++) {
    header_t *h = atomic_load(&table[i]);
    if (h == NULL) continue;
    CHECK(block_ok(h), "%s: block %p damaged", when, (void *)h);
    usable += (int64_t)USABLE(h);
  }
  return usable;
}

static int64_t in_use_now(void) {
  tes_stats_t st;
  tes_stats_get(&st);
  return st.in_use.current;
}

/* The table against the statistics, every other thread stopped (the
 * freers paused, no worker or trimmer running): in_use grew by exactly the
 * table's usable bytes. */
static void check_stats(const char *when, int64_t base_in_use, const int64_t *base_live) {
  int64_t usable = table_usable(when);
  /* The hardened build's usable size is the size asked for; its statistics
   * count whole blocks (less the padding). It parks no heap anyway. */
  if (tes_option_get(TES_OPTION_SECURE)) return;
  tes_stats_t st;
  tes_stats_get(&st);
  int64_t grown = st.in_use.current - base_in_use;
  CHECK(grown == usable, "%s: in_use grew %lld bytes, the table's blocks hold %lld usable bytes", when,
        (long long)grown, (long long)usable);
  if (base_live == NULL) return;
  /* Live blocks a class: the table's blocks of that usable size. */
  int64_t want[TES_STATS_MAX_CLASSES] = {0};
  for (unsigned i = 0; i < SLOTS; i++) {
    header_t *h = atomic_load(&table[i]);
    for (uint32_t c = 0; h != NULL && c < st.class_count; c++)
      if (st.class_block_size[c] == USABLE(h)) want[c]++;
  }
  for (uint32_t c = 0; c < st.class_count; c++)
    CHECK(st.class_live_blocks[c] - base_live[c] == want[c], "%s: class %u (%llu bytes): %lld more live blocks, the table holds %lld",
          when, c, (unsigned long long)st.class_block_size[c], (long long)(st.class_live_blocks[c] - base_live[c]),
          (long long)want[c]);
}

/* The largest usable size pick_size can ask for. */
#define LARGEST_USABLE ((int64_t)600 << 10)

static int run_child(int64_t base_in_use) {
  /* The workers were running at the fork: each may have had one block
   * malloc'd and not yet in the table, or taken out and not yet freed
   * (the freers were paused). Those stay live here, no thread of ours
   * frees them, so what in_use counts beyond the table stays the same
   * through everything below. */
  int64_t stray = in_use_now() - base_in_use - table_usable("child, at the fork");
  bool exact = !tes_option_get(TES_OPTION_SECURE); /* see check_stats */
  CHECK(!exact || (stray >= 0 && stray <= WORKERS * LARGEST_USABLE), "child: in_use %+lld beyond the table's blocks at the fork",
        (long long)stray);
  /* Threads of the child's own: they take the parent's parked heaps. */
  pthread_t t[WORKERS];
  for (int i = 0; i < WORKERS; i++) spawn(&t[i], worker, (void *)(uintptr_t)(1000 + i));
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  TRIM();
  check_stats("child, after its threads", base_in_use + stray, NULL);
  for (unsigned i = 0; i < SLOTS; i++) drop(atomic_exchange(&table[i], NULL));
  TRIM();
  int64_t grown = in_use_now() - base_in_use;
  CHECK(!exact || grown == stray, "child: in_use %+lld after freeing the table, %+lld beyond the table at the fork",
        (long long)grown, (long long)stray);
  return api_failures + atomic_load(&failures_mt);
}

int main(int argc, char **argv) {
  bool with_fork = argc > 1 && strcmp(argv[1], "fork") == 0;
  int rounds = argc > 2 ? atoi(argv[2]) : 1;
  API_GROUP("park stress");
  /* Both builds park unless told not to (the hardened build too since the
   * twentieth session: api_park_stress.secure stresses its parked heaps). */
  const char *park_env = getenv("TESSERA_HEAP_PARK");
  bool park_off = park_env != NULL && strcmp(park_env, "0") == 0;
  CHECK(park_off || tes_option_get(TES_OPTION_HEAP_PARK) == 1, "heap parking is on (TESSERA_HEAP_PARK %s)",
        park_env != NULL ? park_env : "unset");
  if (park_off) printf("note: heap parking is off in this run\n");
  fflush(stdout);
  /* glibc keeps a little memory per concurrent thread (api_warm_up_threads):
   * as many at once as the test runs (spawn), before the baseline. */
  {
    pthread_t t[WORKERS + FREERS + 3];
    for (int i = 0; i < WORKERS + FREERS + 3; i++) spawn(&t[i], api_noop_thread, NULL);
    for (int i = 0; i < WORKERS + FREERS + 3; i++) pthread_join(t[i], NULL);
  }
  for (int round = 0; round < rounds; round++) {
    atomic_store(&stop_freers, 0);
    atomic_store(&stop_trimmer, 0);
    /* The baseline with the freers started (glibc's per-thread memory of
     * live threads) and paused (the table is empty: they free nothing). */
    atomic_store(&freers_pause, 1);
    pthread_t f[FREERS], tr;
    for (int i = 0; i < FREERS; i++) spawn(&f[i], freer, (void *)(uintptr_t)(77 + i + round * 10));
    pause_freers();
    TRIM();
    tes_stats_t st0;
    tes_stats_get(&st0);
    int64_t base_in_use = st0.in_use.current, base_live[TES_STATS_MAX_CLASSES];
    memcpy(base_live, st0.class_live_blocks, sizeof base_live);
    resume_freers();
    for (int g = 0; g < GENERATIONS; g++) {
      bool trim = g % 2 == 1;
      spawn(&tr, trimmer, trim ? &tr : NULL);
      pthread_t w[WORKERS];
      for (int i = 0; i < WORKERS; i++)
        spawn(&w[i], worker, (void *)(uintptr_t)(1 + i + g * WORKERS + round * 1000));
      if (with_fork && g % 4 == 2) {
        pause_freers(); /* the workers run on */
        pid_t pid = fork();
        if (pid == 0) _exit(run_child(base_in_use) ? 1 : 0);
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "generation %d: the child failed (status %#x)", g, status);
        resume_freers();
      }
      for (int i = 0; i < WORKERS; i++) pthread_join(w[i], NULL);
      atomic_store(&stop_trimmer, 1);
      pthread_join(tr, NULL);
      atomic_store(&stop_trimmer, 0);
      pause_freers();
      char when[48];
      snprintf(when, sizeof when, "round %d generation %d", round, g);
      check_stats(when, base_in_use, base_live);
      resume_freers();
    }
    atomic_store(&stop_freers, 1);
    for (int i = 0; i < FREERS; i++) pthread_join(f[i], NULL);
    for (unsigned i = 0; i < SLOTS; i++) drop(atomic_exchange(&table[i], NULL));
    TRIM();
    CHECK(tes_option_get(TES_OPTION_SECURE) || in_use_now() == base_in_use, "round %d: in_use %+lld after freeing the table", round,
          (long long)(in_use_now() - base_in_use));
  }
  CHECK(atomic_load(&failures_mt) == 0, "%d blocks damaged while live", atomic_load(&failures_mt));
  return api_finish("api_park_stress");
}
