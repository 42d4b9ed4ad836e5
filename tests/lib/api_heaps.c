/* api_heaps.c — first-class heaps and tes_heap_visit, black-box.
 *
 * tes_heap_new/malloc/calloc/realloc, tes_heap_visit seeing exactly the
 * live blocks (no more, no fewer, with the right usable size, class and
 * owner), tes_heap_destroy releasing every block at once — also when other
 * threads freed some of its blocks just before — and tes_heap_delete keeping
 * blocks alive and freeable from any thread. The tes_stats gauges
 * (in_use, per-class live blocks) confirm what the walk shows.
 *
 * Linked with libtessera. */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <pthread.h>
#include <stdatomic.h>

enum { MAX_SEEN = 100000 };

typedef struct seen_s {
  tes_block_info_t blocks[MAX_SEEN];
  size_t count;
  size_t overflow;
} seen_t;

static seen_t seen; /* static: the visitor must not allocate */

static bool record_block(const tes_block_info_t *block, void *arg) {
  seen_t *s = arg;
  if (s->count < MAX_SEEN) s->blocks[s->count++] = *block;
  else s->overflow++;
  return true;
}

static int compare_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const tes_block_info_t *)a)->address;
  uintptr_t y = (uintptr_t)((const tes_block_info_t *)b)->address;
  return x < y ? -1 : x > y;
}

/* Every block of the process into `seen`, sorted by address for bsearch. */
static void walk_all_sorted(void) {
  memset(&seen, 0, sizeof seen);
  tes_heap_visit(NULL, record_block, &seen);
  qsort(seen.blocks, seen.count, sizeof seen.blocks[0], compare_address);
}

static int compare_pointer(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return x < y ? -1 : x > y;
}

/* The walk of `heap` must list exactly `expected` (n live blocks), each once,
 * with its usable size and the owning heap. Returns the number of problems. */
static int visit_matches(const tes_heap_t *heap, void **expected, size_t n, const char *what) {
  memset(&seen, 0, sizeof seen);
  tes_heap_visit(heap, record_block, &seen);
  int problems = 0;
  CHECK(seen.overflow == 0 && seen.count == n, "%s: walk saw %zu blocks (+%zu), want %zu", what, seen.count,
        seen.overflow, n);
  problems += seen.count != n;
  qsort(seen.blocks, seen.count, sizeof seen.blocks[0], compare_address);
  qsort(expected, n, sizeof *expected, compare_pointer);
  size_t limit = seen.count < n ? seen.count : n;
  size_t mismatched = 0, wrong_size = 0, wrong_owner = 0;
  for (size_t i = 0; i < limit; i++) {
    mismatched += seen.blocks[i].address != expected[i];
    wrong_size += seen.blocks[i].usable_size != tes_usable_size(seen.blocks[i].address);
    if (heap) wrong_owner += seen.blocks[i].heap != heap;
  }
  CHECK(mismatched == 0, "%s: %zu walked addresses differ from the live blocks", what, mismatched);
  CHECK(wrong_size == 0, "%s: %zu blocks with usable_size != tes_usable_size", what, wrong_size);
  CHECK(wrong_owner == 0, "%s: %zu blocks not attributed to the heap", what, wrong_owner);
  return problems + (int)(mismatched + wrong_size + wrong_owner);
}

static bool stop_after_one(const tes_block_info_t *block, void *arg) {
  (void)block;
  (*(int *)arg)++;
  return false;
}

static void check_basic_heap(void) {
  API_GROUP("heap new/malloc/calloc/realloc/visit");
  tes_heap_t *heap = tes_heap_new();
  REQUIRE(heap != NULL, "tes_heap_new returned NULL");
  enum { N = 3000 };
  static void *blocks[N], *copy[N];
  static size_t sizes[N];
  for (int i = 0; i < N; i++) {
    sizes[i] = i % 100 == 0 ? 300000 : 1 + (size_t)(i * 29) % 2000;
    blocks[i] = (i % 3 == 0) ? tes_heap_calloc(heap, 1, sizes[i]) : tes_heap_malloc(heap, sizes[i]);
    REQUIRE(blocks[i] != NULL, "heap allocation %d (%zu bytes) failed", i, sizes[i]);
    if (i % 3 == 0) {
      size_t nonzero = 0;
      for (size_t j = 0; j < sizes[i]; j++) nonzero += ((unsigned char *)blocks[i])[j] != 0;
      CHECK(nonzero == 0, "tes_heap_calloc(%zu): %zu non-zero bytes", sizes[i], nonzero);
    }
    api_fill(blocks[i], sizes[i]);
  }
  /* realloc within the heap keeps contents (and the block stays the heap's). */
  for (int i = 1; i < N; i += 7) {
    size_t old = sizes[i];
    unsigned char *before = malloc(old);
    memcpy(before, blocks[i], old);
    sizes[i] = old * 3 + 5;
    blocks[i] = tes_heap_realloc(heap, blocks[i], sizes[i]);
    REQUIRE(blocks[i] != NULL, "tes_heap_realloc failed");
    CHECK(memcmp(before, blocks[i], old) == 0, "tes_heap_realloc %zu -> %zu lost contents", old, sizes[i]);
    free(before);
    api_fill(blocks[i], sizes[i]);
  }
  /* A block of the default heap, which must not show in the heap's walk. */
  void *outsider = malloc(64);
  memcpy(copy, blocks, sizeof blocks);
  visit_matches(heap, copy, N, "fresh heap");

  /* The whole-process walk contains the heap's blocks and the outsider. */
  memset(&seen, 0, sizeof seen);
  tes_heap_visit(NULL, record_block, &seen);
  size_t found = 0;
  bool outsider_seen = false;
  qsort(seen.blocks, seen.count, sizeof seen.blocks[0], compare_address);
  for (int i = 0; i < N; i++) {
    tes_block_info_t key = {.address = blocks[i]};
    found += bsearch(&key, seen.blocks, seen.count, sizeof key, compare_address) != NULL;
  }
  for (size_t k = 0; k < seen.count; k++) outsider_seen |= seen.blocks[k].address == outsider;
  CHECK(found == N, "process-wide walk found %zu of the heap's %d blocks", found, N);
  CHECK(outsider_seen, "process-wide walk missed a block of the default heap");

  /* Class indices in the walk agree with the stats table. */
  tes_stats_t stats;
  tes_stats_get(&stats);
  size_t class_mismatch = 0;
  for (size_t k = 0; k < seen.count; k++) {
    uint32_t c = seen.blocks[k].size_class;
    if (c == UINT32_MAX) continue;
    class_mismatch += c >= stats.class_count || stats.class_block_size[c] != seen.blocks[k].usable_size;
  }
  CHECK(class_mismatch == 0, "%zu walked blocks have a size_class whose block size differs", class_mismatch);

  /* Early stop. */
  int calls = 0;
  tes_heap_visit(heap, stop_after_one, &calls);
  CHECK(calls == 1, "visitor returning false was called %d times", calls);

  /* Free every other block with plain free: the walk shows exactly the rest. */
  size_t kept = 0;
  for (int i = 0; i < N; i++) {
    if (i % 2) {
      free(blocks[i]);
    } else {
      CHECK(api_verify(blocks[i], sizes[i]) == SIZE_MAX, "heap block %d corrupted", i);
      copy[kept++] = blocks[i];
    }
  }
  visit_matches(heap, copy, kept, "after freeing half");

  int64_t in_use_before = (tes_stats_get(&stats), stats.in_use.current);
  size_t usable_kept = 0;
  for (size_t k = 0; k < kept; k++) usable_kept += tes_usable_size(copy[k]);
  tes_heap_destroy(heap);
  tes_stats_get(&stats);
  CHECK(in_use_before - stats.in_use.current == (int64_t)usable_kept,
        "tes_heap_destroy released %" PRId64 " in-use bytes, the heap held %zu", in_use_before - stats.in_use.current,
        usable_kept);
  free(outsider);
}

typedef struct free_job_s {
  void **blocks;
  size_t count;
} free_job_t;

static void *free_blocks_thread(void *arg) {
  free_job_t *job = arg;
  for (size_t i = 0; i < job->count; i++) free(job->blocks[i]);
  return NULL;
}

static void check_destroy_with_remote_frees(void) {
  API_GROUP("destroy after frees from other threads");
  tes_stats_t stats;
  for (int round = 0; round < 20; round++) {
    tes_stats_get(&stats);
    int64_t in_use_start = stats.in_use.current;
    tes_heap_t *heap = tes_heap_new();
    REQUIRE(heap, "tes_heap_new");
    enum { N = 4000, THREADS = 2 };
    static void *blocks[N];
    for (int i = 0; i < N; i++) blocks[i] = tes_heap_malloc(heap, 16 + (size_t)(i % 64) * 16);
    /* Two threads free the first half; the frees are still being handed
     * back (not yet collected by the heap) when destroy runs. */
    pthread_t threads[THREADS];
    free_job_t jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
      jobs[t].blocks = blocks + t * (N / 2 / THREADS);
      jobs[t].count = N / 2 / THREADS;
      REQUIRE(pthread_create(&threads[t], NULL, free_blocks_thread, &jobs[t]) == 0, "pthread_create");
    }
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    tes_heap_destroy(heap);
    tes_collect(false);
    tes_stats_get(&stats);
    CHECK(stats.in_use.current == in_use_start, "round %d: in_use %+" PRId64 " after destroy", round,
          stats.in_use.current - in_use_start);
    if (api_failures) break;
  }
  /* A heap created afterwards works. */
  tes_heap_t *heap = tes_heap_new();
  void *p = tes_heap_malloc(heap, 100);
  CHECK(p != NULL, "allocation from a heap after destroys failed");
  tes_heap_destroy(heap);
}

static void check_delete_keeps_blocks(void) {
  API_GROUP("delete keeps blocks alive");
  tes_stats_t stats;
  tes_stats_get(&stats);
  int64_t in_use_start = stats.in_use.current;
  tes_heap_t *heap = tes_heap_new();
  enum { N = 2000 };
  static void *blocks[N], *copy[N];
  static size_t sizes[N];
  for (int i = 0; i < N; i++) {
    sizes[i] = 8 + (size_t)(i * 53) % 3000;
    blocks[i] = tes_heap_malloc(heap, sizes[i]);
    api_fill(blocks[i], sizes[i]);
  }
  tes_heap_delete(heap);
  size_t corrupted = 0;
  for (int i = 0; i < N; i++) corrupted += api_verify(blocks[i], sizes[i]) != SIZE_MAX;
  CHECK(corrupted == 0, "%zu blocks corrupted by tes_heap_delete", corrupted);
  /* Still live: the process-wide walk lists all of them. */
  walk_all_sorted();
  size_t found = 0;
  for (int i = 0; i < N; i++) {
    tes_block_info_t key = {.address = blocks[i]};
    found += bsearch(&key, seen.blocks, seen.count, sizeof key, compare_address) != NULL;
  }
  CHECK(found == N, "after tes_heap_delete the walk finds %zu of %d live blocks", found, N);
  /* New allocations do not overlap them. */
  for (int i = 0; i < 2000; i++) {
    void *p = malloc(sizes[i]);
    memset(p, 0xCD, sizes[i]);
    copy[i] = p;
  }
  corrupted = 0;
  for (int i = 0; i < N; i++) corrupted += api_verify(blocks[i], sizes[i]) != SIZE_MAX;
  CHECK(corrupted == 0, "%zu kept blocks overwritten by new allocations", corrupted);
  for (int i = 0; i < 2000; i++) free(copy[i]);
  /* Freed from another thread and from this one. */
  free_job_t job = {blocks, N / 2};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, free_blocks_thread, &job) == 0, "pthread_create");
  pthread_join(t, NULL);
  for (int i = N / 2; i < N; i++) free(blocks[i]);
  tes_collect(false);
  tes_stats_get(&stats);
  CHECK(stats.in_use.current == in_use_start, "in_use %+" PRId64 " after freeing every block of a deleted heap",
        stats.in_use.current - in_use_start);
}

static void check_many_heaps(void) {
  API_GROUP("many heaps do not leak");
  tes_stats_t stats;
  int64_t committed_after_warmup = 0;
  for (int h = 0; h < 1000; h++) {
    tes_heap_t *heap = tes_heap_new();
    REQUIRE(heap, "tes_heap_new failed at heap %d", h);
    for (int i = 0; i < 100; i++) {
      void *p = tes_heap_malloc(heap, 32 + (size_t)i * 40);
      REQUIRE(p, "tes_heap_malloc failed");
      memset(p, 1, 32 + (size_t)i * 40);
    }
    if (h % 2) tes_heap_destroy(heap);
    else {
      /* A deleted heap's blocks are walked and freed. */
      memset(&seen, 0, sizeof seen);
      tes_heap_visit(heap, record_block, &seen);
      size_t n = seen.count;
      static void *live[200];
      for (size_t k = 0; k < n && k < 200; k++) live[k] = seen.blocks[k].address;
      CHECK(n == 100, "heap %d walked %zu blocks, want 100", h, n);
      tes_heap_delete(heap);
      for (size_t k = 0; k < n && k < 200; k++) free(live[k]);
    }
    if (h == 99) {
      tes_collect(true);
      tes_stats_get(&stats);
      committed_after_warmup = stats.committed.current;
    }
    if (api_failures) break;
  }
  tes_collect(true);
  tes_stats_get(&stats);
  CHECK(stats.committed.current - committed_after_warmup <= 8 * MIB,
        "committed grew by %.1f MiB over 900 heap create/drop cycles",
        (double)(stats.committed.current - committed_after_warmup) / MIB);
}

/* Live blocks of `block_size` in the report between offsets start and end
 * of the stream, or -1 if the report has no line for that size. */
static long report_live_blocks(FILE *report, long start, long end, unsigned long block_size) {
  char line[256];
  long found = -1;
  fseek(report, start, SEEK_SET);
  while (ftell(report) < end && fgets(line, sizeof line, report)) {
    unsigned cls;
    unsigned long size, blocks, bytes;
    if (sscanf(line, "%u %lu %lu %lu", &cls, &size, &blocks, &bytes) == 4 && size == block_size) found = (long)blocks;
  }
  return found;
}

static void check_heap_report(void) {
  API_GROUP("tes_heap_report");
  FILE *report = tmpfile();
  REQUIRE(report != NULL, "tmpfile");
  setvbuf(report, NULL, _IOFBF, 1 << 16);
  fputs("warm-up\n", report); /* the stream's buffer exists before the first walk */
  enum { N = 777 };
  static void *blocks[N];
  for (int i = 0; i < N; i++) blocks[i] = malloc(48);
  size_t usable = tes_usable_size(blocks[0]);
  long first = ftell(report);
  tes_heap_report(report);
  long second = ftell(report);
  for (int i = 0; i < N; i++) free(blocks[i]);
  tes_collect(false);
  tes_heap_report(report);
  fflush(report);
  long end = ftell(report);
  char header[256] = "";
  fseek(report, first, SEEK_SET);
  CHECK(fgets(header, sizeof header, report) && strncmp(header, "tessera heap report:", 20) == 0,
        "report starts with \"%s\"", header);
  long with = report_live_blocks(report, first, second, usable);
  long without = report_live_blocks(report, second, end, usable);
  CHECK(with >= N, "report shows %ld live %zu-byte blocks with %d allocated", with, usable, N);
  CHECK(with - (without < 0 ? 0 : without) == N, "report: %ld then %ld live %zu-byte blocks after freeing %d", with,
        without, usable, N);
  fclose(report);
}

/* ---- walks and statistics while other threads own (and change) blocks ---- */

enum { WORKERS = 3, WORKER_BLOCKS = 512 };
static pthread_barrier_t parked, released;
static void *worker_blocks[WORKERS][WORKER_BLOCKS];
static atomic_bool stop_churn;

static void *parked_worker(void *arg) {
  int w = (int)(intptr_t)arg;
  for (int i = 0; i < WORKER_BLOCKS; i++) worker_blocks[w][i] = malloc(16 + (size_t)i * 8 + (size_t)w);
  pthread_barrier_wait(&parked);
  pthread_barrier_wait(&released);
  for (int i = 0; i < WORKER_BLOCKS; i++) free(worker_blocks[w][i]);
  return NULL;
}

static void *churning_worker(void *arg) {
  unsigned r = (unsigned)(intptr_t)arg * 2654435761u + 1;
  void *slots[256] = {0};
  while (!atomic_load_explicit(&stop_churn, memory_order_relaxed)) {
    r = r * 1103515245u + 12345u;
    int i = (int)((r >> 8) % 256);
    free(slots[i]);
    size_t n = (r >> 4) % 100 == 0 ? 200000 : 8 + (r >> 12) % 3000;
    slots[i] = malloc(n);
    if (slots[i]) memset(slots[i], 1, n < 64 ? n : 64);
  }
  for (int i = 0; i < 256; i++) free(slots[i]);
  return NULL;
}

static bool check_walked_block(const tes_block_info_t *block, void *arg) {
  size_t *bad = arg;
  if (block->usable_size == 0 || ((uintptr_t)block->address & 15) != 0) (*bad)++;
  return true;
}

static void check_walk_other_threads(void) {
  API_GROUP("visit/stats/report with other threads' blocks");
  /* Parked threads: the process-wide walk lists every block they hold. */
  pthread_barrier_init(&parked, NULL, WORKERS + 1);
  pthread_barrier_init(&released, NULL, WORKERS + 1);
  pthread_t threads[WORKERS];
  for (int w = 0; w < WORKERS; w++)
    REQUIRE(pthread_create(&threads[w], NULL, parked_worker, (void *)(intptr_t)w) == 0, "pthread_create");
  pthread_barrier_wait(&parked);
  walk_all_sorted();
  size_t missing = 0;
  for (int w = 0; w < WORKERS; w++)
    for (int i = 0; i < WORKER_BLOCKS; i++) {
      tes_block_info_t key = {.address = worker_blocks[w][i]};
      missing += bsearch(&key, seen.blocks, seen.count, sizeof key, compare_address) == NULL;
    }
  CHECK(missing == 0, "the process-wide walk missed %zu of %d blocks held by other threads", missing,
        WORKERS * WORKER_BLOCKS);
  pthread_barrier_wait(&released);
  for (int w = 0; w < WORKERS; w++) pthread_join(threads[w], NULL);

  /* Churning threads: walking, merging statistics and reporting while they
   * allocate and free must neither crash nor report nonsense. */
  for (int w = 0; w < WORKERS; w++)
    REQUIRE(pthread_create(&threads[w], NULL, churning_worker, (void *)(intptr_t)(w + 1)) == 0, "pthread_create");
  FILE *sink = fopen("/dev/null", "w");
  size_t bad = 0;
  tes_stats_t stats;
  for (int k = 0; k < 300; k++) {
    tes_heap_visit(NULL, check_walked_block, &bad);
    tes_stats_get(&stats);
    if (k % 30 == 0 && sink) tes_heap_report(sink);
  }
  /* (The gauges of running threads are a snapshot, not a barrier: only
   * their presence is checked here; their exactness is api_stats' job.) */
  CHECK(stats.committed.current > 0 && stats.class_count > 0, "statistics empty while threads allocate");
  atomic_store(&stop_churn, true);
  for (int w = 0; w < WORKERS; w++) pthread_join(threads[w], NULL);
  if (sink) fclose(sink);
  CHECK(bad == 0, "%zu walked blocks had usable size 0 or a misaligned address", bad);
}

/* Blocks of an exited thread live on in its abandoned segment, and the next
 * heap that needs a page may adopt that segment. A first-class heap must
 * not: tes_heap_destroy would return the segment, blocks and all, and the
 * next allocations would overwrite them (they did, before the fix: every
 * byte of the 64 blocks below). */
enum { ORPHANS = 64, ORPHAN_SIZE = 48 };
static unsigned char *orphans[ORPHANS];

static void *leave_orphans(void *arg) {
  (void)arg;
  for (int i = 0; i < ORPHANS; i++) {
    orphans[i] = malloc(ORPHAN_SIZE);
    if (orphans[i]) memset(orphans[i], 0x5a, ORPHAN_SIZE);
  }
  return NULL;
}

static void check_destroy_keeps_abandoned_blocks(void) {
  API_GROUP("destroy keeps an exited thread's blocks");
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, leave_orphans, NULL) == 0 && pthread_join(t, NULL) == 0, "thread");
  for (int i = 0; i < ORPHANS; i++) REQUIRE(orphans[i] != NULL, "orphan %d not allocated", i);
  tes_heap_t *heap = tes_heap_new();
  REQUIRE(heap != NULL, "tes_heap_new failed");
  for (int i = 0; i < 1000; i++) REQUIRE(tes_heap_malloc(heap, ORPHAN_SIZE) != NULL, "tes_heap_malloc failed");
  tes_heap_destroy(heap);
  enum { FILL = 100000 };
  static unsigned char *fill[FILL];
  for (int i = 0; i < FILL; i++) {
    fill[i] = malloc(ORPHAN_SIZE);
    REQUIRE(fill[i] != NULL, "malloc failed");
    memset(fill[i], 0x11, ORPHAN_SIZE);
  }
  size_t overwritten = 0;
  for (int i = 0; i < ORPHANS; i++)
    for (int j = 0; j < ORPHAN_SIZE; j++) overwritten += orphans[i][j] != 0x5a;
  CHECK(overwritten == 0, "%zu bytes of an exited thread's live blocks overwritten after tes_heap_destroy",
        overwritten);
  for (int i = 0; i < FILL; i++) free(fill[i]);
  for (int i = 0; i < ORPHANS; i++) free(orphans[i]);
}

/* A thread that exits without destroying or deleting its first-class heap:
 * the heap is deleted with the thread's default heap (as mimalloc does), so
 * its blocks stay valid, and memory freed since goes back. Before, nothing
 * took such a heap's segments: blocks other threads freed into them stayed
 * on remote stacks that no owner would collect, and every such thread left
 * its segments mapped and committed for good (2,000 threads: 579 MB RSS and
 * 8.2 GB committed after malloc_trim, against 1.9 MB and 4.3 MB with a
 * tes_heap_delete at the end of each thread). */
enum { LEFT_THREADS = 64, LEFT_BLOCKS = 200 };
static unsigned char *left_blocks[LEFT_THREADS][LEFT_BLOCKS];
static size_t left_size(int t, int i) { return 48 + (size_t)((t * 31 + i * 17) % 40) * 24; }

static void *leave_heap(void *arg) {
  int t = (int)(intptr_t)arg;
  tes_heap_t *heap = tes_heap_new();
  if (heap == NULL) return NULL;
  for (int i = 0; i < LEFT_BLOCKS; i++) {
    /* one large block per heap too: it must follow the heap's pages */
    size_t size = i == 0 ? (size_t)300 << 10 : left_size(t, i);
    unsigned char *p = tes_heap_malloc(heap, size);
    if (p != NULL) memset(p, (t + i) & 0xff, size);
    left_blocks[t][i] = p;
  }
  /* Some die in the heap's own thread, some are freed by it into its bins. */
  for (int i = 1; i < LEFT_BLOCKS; i += 4) {
    free(left_blocks[t][i]);
    left_blocks[t][i] = NULL;
  }
  return NULL; /* no tes_heap_destroy, no tes_heap_delete */
}

/* A per-thread heap dropped by its pthread key's destructor, which runs
 * after libtessera's (the key is made later): the heap must still be the
 * thread's to destroy or delete then, not already deleted and its struct
 * back in the pool (released twice, the pool then handed one struct to two
 * heaps). */
static pthread_key_t heap_key;
static void drop_heap(void *value) {
  static atomic_int dropped;
  if (atomic_fetch_add(&dropped, 1) % 2) tes_heap_destroy(value);
  else tes_heap_delete(value);
}
static void *keyed_heap(void *arg) {
  (void)arg;
  tes_heap_t *heap = tes_heap_new();
  if (heap == NULL) return NULL;
  void *blocks[100];
  for (int i = 0; i < 100; i++) {
    blocks[i] = tes_heap_malloc(heap, 64 + (size_t)i * 8);
    if (blocks[i] != NULL) memset(blocks[i], 0x33, 64);
  }
  for (int i = 0; i < 100; i++) free(blocks[i]); /* (a deleted heap's live blocks would stay) */
  pthread_setspecific(heap_key, heap);
  return NULL;
}

static size_t left_broken(int t, int i) {
  size_t size = i == 0 ? (size_t)300 << 10 : left_size(t, i), broken = 0;
  for (size_t j = 0; j < size; j++) broken += left_blocks[t][i][j] != (unsigned char)((t + i) & 0xff);
  return broken;
}

static void check_thread_exit_deletes_heaps(void) {
  API_GROUP("thread exit deletes the first-class heaps it left");
  tes_stats_t stats;
  tes_collect(true);
  tes_stats_get(&stats);
  int64_t committed_before = stats.committed.current;
  size_t broken = 0, missing = 0;
  for (int t = 0; t < LEFT_THREADS; t++) {
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, leave_heap, (void *)(intptr_t)t) == 0 && pthread_join(thread, NULL) == 0,
            "thread");
    /* Half of what is left dies now (frees into the exited thread's pages). */
    for (int i = 0; i < LEFT_BLOCKS; i++) {
      if (i % 4 == 1) continue;
      if (left_blocks[t][i] == NULL) {
        missing++;
        continue;
      }
      if (i % 2 == 0) {
        broken += left_broken(t, i);
        free(left_blocks[t][i]);
        left_blocks[t][i] = NULL;
      }
    }
  }
  CHECK(missing == 0, "%zu tes_heap_malloc calls failed", missing);
  /* The others are still live blocks: intact, walked, freeable. */
  walk_all_sorted();
  size_t unwalked = 0;
  for (int t = 0; t < LEFT_THREADS; t++)
    for (int i = 0; i < LEFT_BLOCKS; i++) {
      if (left_blocks[t][i] == NULL) continue;
      broken += left_broken(t, i);
      tes_block_info_t key = {.address = left_blocks[t][i]};
      unwalked += bsearch(&key, seen.blocks, seen.count, sizeof seen.blocks[0], compare_address) == NULL;
      free(left_blocks[t][i]);
      left_blocks[t][i] = NULL;
    }
  CHECK(broken == 0, "%zu bytes of blocks of heaps left by exited threads changed", broken);
  CHECK(unwalked == 0, "%zu live blocks of heaps left by exited threads not walked", unwalked);
  enum { KEYED = 40 };
  REQUIRE(pthread_key_create(&heap_key, drop_heap) == 0, "pthread_key_create");
  for (int t = 0; t < KEYED; t++) {
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, keyed_heap, NULL) == 0 && pthread_join(thread, NULL) == 0, "thread");
  }
  tes_heap_t *heaps[8];
  size_t shared = 0;
  for (int i = 0; i < 8; i++) {
    heaps[i] = tes_heap_new();
    REQUIRE(heaps[i] != NULL, "tes_heap_new");
    for (int j = 0; j < i; j++) shared += heaps[j] == heaps[i];
  }
  CHECK(shared == 0, "tes_heap_new handed out one heap struct %zu times more after key destructors dropped heaps",
        shared);
  for (int i = 0; i < 8; i++) tes_heap_destroy(heaps[i]);
  tes_collect(true);
  tes_stats_get(&stats);
  int64_t grown = stats.committed.current - committed_before;
  /* Each thread's heap had a 4 MiB segment: 256 MiB when they stay. */
  CHECK(grown < ((int64_t)32 << 20), "committed grew by %" PRId64 " KiB over %d threads that left a heap",
        grown >> 10, LEFT_THREADS);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  REQUIRE(api_malloc_is_linked_tessera(), "api_heaps must be linked with libtessera");
  alarm(120); /* a heap list made cyclic hangs the next thread exit (1.6 s a run) */
  api_warm_up_threads();
  check_basic_heap();
  check_destroy_with_remote_frees();
  check_destroy_keeps_abandoned_blocks();
  check_delete_keeps_blocks();
  check_many_heaps();
  check_heap_report();
  check_walk_other_threads();
  check_thread_exit_deletes_heaps();
  return api_finish("api_heaps");
}
