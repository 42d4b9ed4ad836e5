/* api_purge_thread.c — memory freed by a thread that then stops calling the
 * allocator (alive, but idle) still goes back to the OS: by the purge thread
 * (TESSERA_PURGE_THREAD), by malloc_trim from another thread, or by other
 * threads' slow paths.
 *
 * Each mode runs in a fresh process (fresh_modes.h). The first four turn the
 * option on by tes_option_set at the start of the mode:
 *   idle     a worker allocates 48 MiB (small, medium and large blocks),
 *            frees all of it and blocks on a condition variable; the main
 *            thread watches RSS without calling the allocator (RSS is read
 *            with open/read): it must fall by 80% of what was freed within
 *            3 s (whole segments, through the segment cache).
 *   pages    the same with two size classes whose pages share segments: the
 *            blocks of one class stay live, so the other's pages are retired
 *            inside segments still in use (the heap's own purge list, which
 *            only the owner or the purge thread can purge).
 *   churn    four threads allocate, pattern-fill, verify and free for 1.5 s
 *            with a 1 ms purge delay, so the purge thread purges pages all
 *            the time while their owners retire and take pages back: a purge
 *            of a page in use would zero live blocks, which the verification
 *            catches.
 *   fork     a worker fills and empties pages while the main thread forks
 *            200 children. The first 12 free 24 MiB they allocated and,
 *            idle, must see their RSS fall (the child has no purge thread of
 *            its parent's: it starts its own); the others call malloc_trim,
 *            which purges every heap and hung on a purge lock the worker
 *            held at the fork; an alarm catches a hang.
 *   last     the purge thread must not keep a process alive: a child whose
 *            main thread leaves by pthread_exit, and a child forked from a
 *            worker thread whose only thread then ends (Python's
 *            test_threading hung there), must each end within 5 s.
 * and two run without it, on the pages of an idle worker as in `pages`:
 *   trim     the main thread calls malloc_trim(0): RSS must fall at once
 *            (it used to purge only the caller's own heap, and said 1);
 *   sweep    the main thread keeps allocating and freeing (slow paths, not
 *            a trim): RSS must fall within 3 s, since a slow path purges
 *            other heaps' overdue pages, at most once per purge delay.
 *   recycled a worker fills 32 MiB and frees it, then exits: its segments
 *            wait in the segment cache, resident (a 60 s purge delay). A
 *            second worker takes two of them back for a block each (one
 *            small, one medium) and idles. malloc_trim(0) from the main
 *            thread must leave RSS within 3 MiB of the start: the pages of
 *            the taken segments that the blocks do not use must go too
 *            (they stayed resident, up to 4 MiB a segment, while one of its
 *            pages was in use).
 *   kept     8 workers each allocate 12 MiB of 1,000-byte blocks (written),
 *            free them all and idle; the main thread calls malloc_trim(0):
 *            RSS must end within 12 MiB of the start. The hardened build
 *            keeps up to 4 MiB of emptied pages a heap for reuse (src/heap.c,
 *            "kept empty pages"), which only their owner retired: 32 MiB
 *            stayed (16 workers of 16 MiB: 66 MiB, the default build 3).
 *   kept_thread  the same with the purge thread instead of the trim: RSS
 *            must get there within 5 s (about 0.1 s is usual).
 * Without the option the RSS of idle and pages stays up (checked by hand:
 * docs/USAGE.md, section options). tests/sanitize runs churn under ASan and
 * TSan with TES_API_ONLY, where the calls go through tes_malloc and tes_free
 * and the sanitizer keeps malloc. */
#include "api_check.h"
#include "fresh_modes.h"
#include "tessera.h"

#ifdef TES_API_ONLY
#define MALLOC tes_malloc
#define FREE tes_free
#define TRIM() tes_collect(true) /* what malloc_trim does under libtessera */
#else
#define MALLOC malloc
#define FREE free
#define TRIM() malloc_trim(0)
#endif

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>



static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage; /* 1: worker freed its memory; 2: main is done */

static void set_stage(int s) {
  pthread_mutex_lock(&mutex);
  stage = s;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&mutex);
}

static void wait_stage(int s) {
  pthread_mutex_lock(&mutex);
  while (stage < s) pthread_cond_wait(&cond, &mutex);
  pthread_mutex_unlock(&mutex);
}

/* Wait, without calling the allocator, until RSS is at most `target` bytes;
 * returns the milliseconds it took, or -1 after `limit_ms`. */
static long wait_rss_at_most(int64_t target, long limit_ms) {
  for (long waited = 0; waited <= limit_ms; waited += 10) {
    if (api_rss_bytes() <= target) return waited;
    api_sleep_ms(10);
  }
  return -1;
}

#define MAX_BLOCKS 200000
static void *blocks[MAX_BLOCKS];
static size_t block_count;

/* Allocate about `bytes` in blocks cycling through `sizes`, touching each. */
static void allocate(size_t bytes, const size_t *sizes, size_t nsizes) {
  size_t total = 0;
  block_count = 0;
  while (total < bytes && block_count < MAX_BLOCKS) {
    size_t size = sizes[block_count % nsizes];
    char *p = MALLOC(size);
    REQUIRE(p != NULL, "malloc(%zu)", size);
    memset(p, 0x5a, size);
    blocks[block_count++] = p;
    total += size;
  }
}

static size_t keep_every; /* pages mode: blocks at indices % keep_every == 0 stay live */
/* RSS with every block allocated, read by the worker before it frees any:
 * read after the frees, it missed what the purge thread had already given
 * back while the main thread waited for a core (lib.api_purge_thread failed
 * under load with "only 25 MiB freed"). */
static int64_t high_rss;

static void *idle_worker(void *arg) {
  const size_t *which = arg;
  if (which[0] == 0) {
    static const size_t mixed[] = {48, 200, 1000, 3000, 20000, 200000, 900000};
    allocate(48 * MIB, mixed, 7);
    high_rss = api_rss_bytes();
    for (size_t i = 0; i < block_count; i++) FREE(blocks[i]);
  } else {
    /* Two classes alternating: 64-byte blocks (kept) share segments with
     * 1,500-byte ones (freed), each class in pages of its own. */
    static const size_t two[] = {64, 1500};
    allocate(48 * MIB, two, 2);
    high_rss = api_rss_bytes();
    for (size_t i = 0; i < block_count; i++)
      if (i % keep_every != 0) FREE(blocks[i]);
  }
  set_stage(1);
  wait_stage(2); /* idle: no allocator call until main is done */
  return NULL;
}

enum reclaim { BY_PURGE_THREAD, BY_TRIM, BY_SWEEP };

/* Without calling the allocator (BY_PURGE_THREAD), or calling it as `how`
 * says, until RSS is at most `target`; milliseconds taken, -1 after 3 s. */
static long reclaim(enum reclaim how, int64_t target) {
  if (how == BY_PURGE_THREAD) return wait_rss_at_most(target, 3000);
  if (how == BY_TRIM) {
    int released = malloc_trim(0);
    CHECK(released == 1, "malloc_trim returned %d", released);
    return api_rss_bytes() <= target ? 0 : -1;
  }
  double start = api_now_seconds();
  static void *churn[2000];
  while (api_now_seconds() - start < 3.0) {
    for (int i = 0; i < 2000; i++) churn[i] = MALLOC(600 + (size_t)(i % 5) * 16);
    for (int i = 0; i < 2000; i++) FREE(churn[i]);
    if (api_rss_bytes() <= target) return (long)((api_now_seconds() - start) * 1000);
    api_sleep_ms(5);
  }
  return -1;
}

static int idle_mode(bool pages, enum reclaim how) {
  static const char *const names[] = {"idle", "pages", "trim", "sweep"};
  API_GROUP(names[how == BY_PURGE_THREAD ? (pages ? 1 : 0) : how + 1]);
  REQUIRE(tes_option_set(TES_OPTION_PURGE_THREAD, how == BY_PURGE_THREAD) == 0, "option");
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 25);
  int64_t base = api_rss_bytes();
  keep_every = 2;
  size_t which[1] = {pages ? 1 : 0};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, idle_worker, which) == 0, "thread");
  wait_stage(1);
  int64_t high = high_rss; /* the worker's stage change orders its store before this read */
  /* idle: everything was freed; pages: the 1,500-byte blocks, 1500/1564 of
   * the bytes (their pages hold nothing else). */
  int64_t freed = pages ? (high - base) * 1500 / 1564 : high - base;
  int64_t target = high - freed * 8 / 10;
  long ms = reclaim(how, target);
  int64_t now = api_rss_bytes();
  CHECK(freed > (int64_t)(30 * MIB), "only %lld MiB freed", (long long)(freed / (int64_t)MIB));
  CHECK(ms >= 0, "RSS %lld MiB after 3 s (trim: at once): base %lld MiB, high %lld MiB, target %lld MiB",
        (long long)(now / (int64_t)MIB), (long long)(base / (int64_t)MIB), (long long)(high / (int64_t)MIB),
        (long long)(target / (int64_t)MIB));
  printf("%s: RSS %lld -> %lld MiB in %ld ms while the worker was idle\n", api_current_group,
         (long long)(high / (int64_t)MIB), (long long)(now / (int64_t)MIB), ms);
  set_stage(2);
  pthread_join(t, NULL);
  if (pages)
    for (size_t i = 0; i < block_count; i += keep_every) FREE(blocks[i]);
  return api_finish(api_current_group);
}

static void *fill_and_free(void *arg) {
  (void)arg;
  static const size_t one[] = {1000};
  allocate(32 * MIB, one, 1);
  /* Last in, first out: the first segment, filled whole, empties last and
   * is the cache's newest, the one the next segment request takes. */
  for (size_t i = block_count; i-- > 0;) FREE(blocks[i]);
  return NULL;
}

static void *take_two_blocks(void *arg) {
  void **block = arg;
  /* One block in small pages, one in medium pages: two segments. */
  static const size_t sizes[2] = {64, 20000};
  for (int i = 0; i < 2; i++) {
    block[i] = MALLOC(sizes[i]);
    REQUIRE(block[i] != NULL, "malloc(%zu)", sizes[i]);
    memset(block[i], 0x5a, sizes[i]);
  }
  set_stage(1);
  wait_stage(2);
  return NULL;
}

static int recycled_mode(void) {
  API_GROUP("recycled");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_THREAD, 0) == 0, "option");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 60000) == 0, "option");
  int64_t base = api_rss_bytes();
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, fill_and_free, NULL) == 0, "thread");
  pthread_join(t, NULL);
  int64_t cached = api_rss_bytes();
  void *block[2] = {NULL, NULL};
  REQUIRE(pthread_create(&t, NULL, take_two_blocks, block) == 0, "thread");
  wait_stage(1);
  int released = malloc_trim(0);
  int64_t trimmed = api_rss_bytes();
  CHECK(released == 1, "malloc_trim returned %d", released);
  CHECK(cached - base > (int64_t)(24 * MIB), "only %lld MiB resident in the cache",
        (long long)((cached - base) / (int64_t)MIB));
  CHECK(trimmed - base <= (int64_t)(3 * MIB), "RSS %lld KiB above the start after malloc_trim",
        (long long)((trimmed - base) / 1024));
  printf("recycled: RSS +%lld KiB with the cache full, +%lld KiB after malloc_trim\n",
         (long long)((cached - base) / 1024), (long long)((trimmed - base) / 1024));
  set_stage(2);
  pthread_join(t, NULL);
  FREE(block[0]);
  FREE(block[1]);
  return api_finish(api_current_group);
}

static _Atomic bool churn_stop;
static _Atomic long churn_blocks;

static void *churn_worker(void *arg) {
  uint64_t rng = (uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
  enum { SLOTS = 2048 };
  static _Thread_local void *slot[SLOTS];
  static _Thread_local size_t slot_size[SLOTS];
  long n = 0;
  while (!churn_stop) {
    for (int k = 0; k < 4096; k++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      size_t i = rng % SLOTS;
      if (slot[i] != NULL) {
        for (size_t j = 0; j < slot_size[i]; j += 61)
          if (((uint8_t *)slot[i])[j] != api_pattern_byte(slot[i], slot_size[i], j)) {
            fprintf(stderr, "block %p (%zu bytes) changed at %zu\n", slot[i], slot_size[i], j);
            abort();
          }
        FREE(slot[i]);
        slot[i] = NULL;
      } else {
        /* Mostly small, some medium, so pages empty and refill often. */
        size_t size = (rng >> 20) % 16 == 0 ? 1024 + (rng >> 24) % 60000 : 16 + (rng >> 24) % 900;
        slot[i] = MALLOC(size);
        REQUIRE(slot[i] != NULL, "malloc");
        slot_size[i] = size;
        for (size_t j = 0; j < size; j += 61) ((uint8_t *)slot[i])[j] = api_pattern_byte(slot[i], size, j);
        n++;
      }
    }
    if (rng % 8 == 0) /* empty everything now and then: whole pages retire */
      for (size_t i = 0; i < SLOTS; i++) FREE(slot[i]), slot[i] = NULL;
  }
  for (size_t i = 0; i < SLOTS; i++) FREE(slot[i]), slot[i] = NULL;
  churn_blocks += n;
  return NULL;
}

static int churn_mode(void) {
  API_GROUP("churn");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_THREAD, 1) == 0, "option");
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 1);
  tes_stats_t before, after;
  tes_stats_get(&before);
  pthread_t t[4];
  for (uintptr_t i = 0; i < 4; i++) REQUIRE(pthread_create(&t[i], NULL, churn_worker, (void *)(i + 1)) == 0, "thread");
  api_sleep_ms(1500);
  churn_stop = true;
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  tes_stats_get(&after);
  /* The workers' heaps were parked at their exit, and the purge thread
   * abandons them within a purge delay (1 ms) while these statistics walk
   * them: no thread of ours runs, so every reading is exact and the same
   * (an abandon under the walk counted a heap's bins, delayed blocks and
   * counters twice or not at all; TSan reported the race, sanitize.tsan). */
  for (int i = 0; i < 300; i++) {
    tes_stats_t again;
    tes_stats_get(&again);
    CHECK(again.in_use.current == after.in_use.current && again.malloc_calls == after.malloc_calls &&
              again.free_calls == after.free_calls,
          "statistics changed with no thread running: in use %lld then %lld, mallocs %llu then %llu, frees %llu "
          "then %llu",
          (long long)after.in_use.current, (long long)again.in_use.current, (unsigned long long)after.malloc_calls,
          (unsigned long long)again.malloc_calls, (unsigned long long)after.free_calls,
          (unsigned long long)again.free_calls);
  }
  uint64_t purged = after.os_purged_bytes - before.os_purged_bytes;
  CHECK(purged > 0, "nothing purged");
  printf("churn: %ld blocks verified, %llu MiB purged meanwhile\n", (long)churn_blocks,
         (unsigned long long)(purged / MIB));
  return api_finish("api_purge_thread churn");
}

/* Fills and empties whole pages and segments, so that its heap's purge
 * lock is often held when the main thread forks. */
static void *fork_churn(void *unused) {
  (void)unused;
  enum { N = 4096 };
  static void *p[N];
  while (!churn_stop) {
    for (int i = 0; i < N; i++) p[i] = MALLOC(1024);
    for (int i = 0; i < N; i++) FREE(p[i]);
  }
  return NULL;
}

static int fork_mode(void) {
  API_GROUP("fork");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_THREAD, 1) == 0, "option");
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 10);
  alarm(60);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, fork_churn, NULL) == 0, "thread");
  static const size_t sizes[] = {100, 700, 5000, 300000};
  for (int round = 0; round < 200; round++) {
    allocate(8 * MIB, sizes, 4); /* the parent frees too: purges pending at the fork */
    for (size_t i = 0; i < block_count; i++) FREE(blocks[i]);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
      if (round >= 12) { /* a forced purge of every heap: other threads' purge locks must not be held here */
        malloc_trim(0);
        _exit(0);
      }
      int64_t base = api_rss_bytes();
      allocate(24 * MIB, sizes, 4);
      int64_t high = api_rss_bytes();
      for (size_t i = 0; i < block_count; i++) FREE(blocks[i]);
      long ms = wait_rss_at_most(high - (high - base) * 7 / 10, 3000);
      _exit(ms >= 0 ? 0 : 1);
    }
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %#x (1: RSS stayed up)", round,
          (unsigned)status);
  }
  churn_stop = true;
  pthread_join(t, NULL);
  alarm(0);
  return api_finish("api_purge_thread fork");
}

/* Start the purge thread (a slow path with the option on). */
static void start_purge_thread(void) {
  tes_option_set(TES_OPTION_PURGE_THREAD, 1);
  static const size_t sizes[] = {64, 3000};
  allocate(2 * MIB, sizes, 2);
  for (size_t i = 0; i < block_count; i++) FREE(blocks[i]);
}

static void *end_by_returning(void *unused) {
  (void)unused;
  start_purge_thread(); /* in the child: its own purge thread */
  return NULL;          /* the child's last thread of its own ends here */
}

static void *fork_from_worker(void *unused) {
  (void)unused;
  pid_t pid = fork();
  if (pid == 0) {
    end_by_returning(NULL);
    pthread_exit(NULL); /* the child's only thread: not its main one */
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return (void *)(intptr_t)(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1);
}

#define KEPT_WORKERS 8
#define KEPT_BYTES (12 * MIB)
#define KEPT_SLACK (12 * MIB)

static void *kept_worker(void *arg) {
  (void)arg;
  size_t n = (size_t)(KEPT_BYTES / 1000);
  void **v = MALLOC(n * sizeof *v);
  REQUIRE(v != NULL, "malloc");
  for (size_t i = 0; i < n; i++) {
    v[i] = MALLOC(1000);
    REQUIRE(v[i] != NULL, "malloc(1000)");
    memset(v[i], 0x5a, 1000);
  }
  for (size_t i = 0; i < n; i++) FREE(v[i]);
  FREE(v);
  pthread_mutex_lock(&mutex);
  stage++; /* workers done */
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&mutex);
  wait_stage(KEPT_WORKERS + 1); /* idle: no allocator call until main is done */
  return NULL;
}

/* The emptied pages idle workers keep (hardened build) go back by a trim
 * from another thread, or by the purge thread. */
static int kept_mode(bool by_purge_thread) {
  API_GROUP(by_purge_thread ? "kept_thread" : "kept");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_THREAD, by_purge_thread) == 0, "option");
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 25);
  int64_t base = api_rss_bytes();
  pthread_t t[KEPT_WORKERS];
  for (int i = 0; i < KEPT_WORKERS; i++) REQUIRE(pthread_create(&t[i], NULL, kept_worker, NULL) == 0, "thread");
  wait_stage(KEPT_WORKERS);
  int64_t freed = api_rss_bytes();
  long ms = 0;
  if (by_purge_thread) {
    ms = wait_rss_at_most(base + KEPT_SLACK, 5000);
  } else {
    int released = malloc_trim(0);
    CHECK(released == 1, "malloc_trim returned %d", released);
  }
  int64_t now = api_rss_bytes();
  CHECK(ms >= 0 && now - base <= KEPT_SLACK,
        "%d idle workers that freed %lld MiB each: RSS %lld KiB above the start (%s), at most %lld allowed",
        KEPT_WORKERS, (long long)(KEPT_BYTES / MIB), (long long)((now - base) / 1024),
        by_purge_thread ? "after 5 s with the purge thread" : "after malloc_trim",
        (long long)(KEPT_SLACK / 1024));
  printf("%s: RSS +%lld KiB with the workers idle, +%lld KiB %s\n", api_current_group,
         (long long)((freed - base) / 1024), (long long)((now - base) / 1024),
         by_purge_thread ? "once the purge thread ran" : "after malloc_trim");
  set_stage(KEPT_WORKERS + 1);
  for (int i = 0; i < KEPT_WORKERS; i++) pthread_join(t[i], NULL);
  return api_finish(api_current_group);
}

/* The churn of churn_mode with no purge thread, while the main thread
 * calls malloc_trim(0) all the time (not tes_stats_get: it reads the
 * heaps' counters while their owners write them, a race TSan reports): in the
 * hardened build every trim gives back the pages the workers keep empty,
 * while they take them back and carve them again; a page given back while
 * one of its blocks was live, or a block handed out twice, changes a
 * block the workers verify. tests/sanitize runs it under ASan and TSan
 * against the hardened library (TES_API_ONLY: tes_collect(true) for the
 * trim). */
static int kept_churn_mode(void) {
  API_GROUP("kept_churn");
  REQUIRE(tes_option_set(TES_OPTION_PURGE_THREAD, 0) == 0, "option");
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 25);
  tes_stats_t before, after;
  tes_stats_get(&before);
  pthread_t t[3];
  for (uintptr_t i = 0; i < 3; i++) REQUIRE(pthread_create(&t[i], NULL, churn_worker, (void *)(i + 7)) == 0, "thread");
  double start = api_now_seconds();
  long trims = 0;
  while (api_now_seconds() - start < 1.5) {
    TRIM();
    trims++;
  }
  churn_stop = true;
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  tes_stats_get(&after);
  printf("kept_churn: %ld blocks verified, %ld trims meanwhile, %llu MiB purged\n", (long)churn_blocks, trims,
         (unsigned long long)((after.os_purged_bytes - before.os_purged_bytes) / MIB));
  return api_finish(api_current_group);
}

/* Runs `child` in a child process; true if that process ended by itself
 * within 5 s with status 0. */
static bool ends_by_itself(void (*child)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    setpgid(0, 0); /* a group of its own: a grandchild that hangs is killed with it */
    child();
    _exit(3);
  }
  setpgid(pid, pid);
  for (int waited = 0; waited < 500; waited++) {
    int status = 0;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    api_sleep_ms(10);
  }
  kill(-pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return false;
}

static void main_leaves(void) {
  start_purge_thread();
  pthread_exit(NULL);
}

static void worker_forks(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, fork_from_worker, NULL) != 0) _exit(4);
  pthread_exit(NULL);
}

static int last_mode(void) {
  API_GROUP("last");
  CHECK(ends_by_itself(main_leaves), "a process whose main thread left by pthread_exit did not end");
  CHECK(ends_by_itself(worker_forks), "a child forked from a worker thread did not end with its thread");
  return api_finish("api_purge_thread last");
}

int main(int argc, char **argv) {
  if (argc > 1) {
    if (!strcmp(argv[1], "idle")) return idle_mode(false, BY_PURGE_THREAD);
    if (!strcmp(argv[1], "pages")) return idle_mode(true, BY_PURGE_THREAD);
    if (!strcmp(argv[1], "trim")) return idle_mode(true, BY_TRIM);
    if (!strcmp(argv[1], "sweep")) return idle_mode(true, BY_SWEEP);
    if (!strcmp(argv[1], "churn")) return churn_mode();
    if (!strcmp(argv[1], "fork")) return fork_mode();
    if (!strcmp(argv[1], "last")) return last_mode();
    if (!strcmp(argv[1], "recycled")) return recycled_mode();
    if (!strcmp(argv[1], "kept")) return kept_mode(false);
    if (!strcmp(argv[1], "kept_thread")) return kept_mode(true);
    if (!strcmp(argv[1], "kept_churn")) return kept_churn_mode();
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
  }
  static const char *const modes[] = {"idle", "pages",    "churn", "fork",        "last",
                                      "trim", "sweep",    "recycled", "kept", "kept_thread", "kept_churn"};
  return run_modes_in_fresh_processes("api_purge_thread", argv, modes, 11) ? 1 : 0;
}
