/* unit_lifecycle.c — thread and fork life-cycle edges (src/init.c):
 *
 *   late_alloc  a pthread key destructor that waits for the last round
 *               (PTHREAD_DESTRUCTOR_ITERATIONS) and then allocates: the
 *               thread's new heap is on no key any more; it must still be
 *               abandoned once the thread is gone ("late heaps");
 *   late_free   the same destructor only frees, in a thread that never
 *               allocated: the heap that free makes is a late heap too;
 *   keys_gone   every pthread key taken before the first thread heap: no
 *               destructor at all, every thread's heap is a late heap;
 *   atfork      fork handlers registered before libtessera's (so theirs run
 *               inside its fork window) allocate small and large blocks:
 *               before, the allocator's own locks were held and fork hung.
 *   main_exit   the main thread leaves a first-class heap and ends with
 *               pthread_exit: its heap waits on the late list, and must be
 *               reaped although its zombie task still answers tgkill;
 *   fork_late   a thread leaves a first-class heap and is gone, then the
 *               main thread forks: the child must not keep its heap;
 *   fc_count    another thread destroys and deletes the first-class heaps
 *               a thread keeps making: its count of them must end at 0;
 *   fc_delete_mt another thread deletes a heap while its thread checks and
 *               frees the heap's blocks: nothing reported or lost.
 *
 * Each runs in a fresh process (fresh_modes.h: this program re-executes
 * itself), so the key state and the handler order are those of a
 * program's start. */
#include "fresh_modes.h"
#include "unit_common.h"

#include "internal.h"
#include "tessera.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { THREADS = 200 };

static pthread_key_t late_key;
typedef struct late_state_s {
  int round;
  int allocate; /* 1: the last round allocates, 0: it frees `block` */
  void *block;
} late_state_t;

static void late_destructor(void *value) {
  late_state_t *s = value;
  if (++s->round < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_setspecific(late_key, s); /* once more in the next round */
    return;
  }
  if (s->allocate) {
    for (int i = 0; i < 20; i++) {
      char *p = malloc(64 + (size_t)i * 100);
      if (p) p[0] = 1;
      free(p);
    }
    s->block = malloc(1000); /* kept by the main thread */
  } else {
    free(s->block);
    s->block = NULL;
  }
}

static void *late_thread(void *arg) {
  late_state_t *s = arg;
  if (s->allocate) free(malloc(100)); /* the thread's heap, abandoned by our destructor */
  pthread_setspecific(late_key, s);
  return NULL;
}

/* Threads that end after the allocator's destructor: every heap they made
 * must be abandoned (threads_exited catches up with threads_started). */
/* tes_collect reaps late heaps whose threads are gone. A joined thread's
 * kernel task can outlive pthread_join by a moment (the join wakes when
 * the task clears its tid, before the kernel unhashes it), so this waits
 * up to 2 s for the last ones. */
static void collect_until_reaped(size_t keep) {
  for (int i = 0; i < 2000; i++) {
    tes_collect(true);
    if (tes_late_heap_count() <= keep) return;
    usleep(1000);
  }
}

static void run_late(int allocate) {
  free(malloc(16)); /* libtessera's key exists: ours comes after it */
  REQUIRE(pthread_key_create(&late_key, late_destructor) == 0, "pthread_key_create");
  static late_state_t states[THREADS];
  for (int i = 0; i < THREADS; i++) {
    states[i] = (late_state_t){0, allocate, allocate ? NULL : malloc(100)};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, late_thread, &states[i]) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(states[i].round == PTHREAD_DESTRUCTOR_ITERATIONS, "thread %d: destructor ran %d rounds", i,
          states[i].round);
    CHECK(allocate ? states[i].block != NULL : states[i].block == NULL, "thread %d: last round did not run", i);
  }
  collect_until_reaped(0);
  tes_stats_t st;
  tes_stats_get(&st);
  CHECK(tes_late_heap_count() == 0, "%zu late heaps left after every thread ended", tes_late_heap_count());
  CHECK(st.threads_exited + 1 == st.threads_started, "threads started %llu, exited %llu (want started - 1)",
        (unsigned long long)st.threads_started, (unsigned long long)st.threads_exited);
  for (int i = 0; i < THREADS; i++) {
    if (states[i].block) memset(states[i].block, 7, 1000); /* still a live, writable block */
    free(states[i].block);
  }
}

/* No key left for the allocator: it must still reclaim every thread's heap. */
static void *churn_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 50; i++) free(malloc(32 + (size_t)i * 8));
  return NULL;
}
static void run_keys_gone(void) {
  /* Nothing may have allocated yet in this fresh process (the allocator
   * creates its key with the first thread heap). */
  REQUIRE(tes_tls_heap->is_static, "the main thread already has a heap: the allocator has its key");
  pthread_key_t k;
  int taken = 0;
  while (pthread_key_create(&k, NULL) == 0) taken++;
  printf("keys_gone: took %d keys\n", taken);
  for (int i = 0; i < THREADS; i++) {
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, churn_thread, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
  }
  collect_until_reaped(1); /* the main thread's heap is late too, and lives on */
  tes_stats_t st;
  tes_stats_get(&st);
  CHECK(st.threads_started >= THREADS, "threads started %llu", (unsigned long long)st.threads_started);
  CHECK(tes_late_heap_count() <= 1, "%zu late heaps left", tes_late_heap_count());
  CHECK(st.threads_exited + 1 >= st.threads_started, "threads started %llu, exited %llu",
        (unsigned long long)st.threads_started, (unsigned long long)st.threads_exited);
}

/* pthread_exit from main with a first-class heap left: the heap is kept
 * until the main thread is gone, and a main thread that exits while others
 * run stays a zombie task that tgkill's probe still finds. Before, its heap
 * (and the first-class one) stayed on the late list for good: the blocks
 * freed here came back to no one (committed 33 MB after malloc_trim for 20 MB
 * of blocks freed, 4.6 MB without the heap left). */
enum { MAIN_BLOCKS = 4000 };
static unsigned char *main_blocks[MAIN_BLOCKS];
static unsigned char *main_heap_block;
static bool main_is_zombie(void) {
  char text[512];
  FILE *f = fopen("/proc/self/stat", "r");
  if (f == NULL) return false;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  const char *p = strrchr(text, ')');
  return p != NULL && p[1] == ' ' && p[2] == 'Z';
}
static void *main_exit_worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 20000 && !main_is_zombie(); i++) usleep(1000);
  REQUIRE(main_is_zombie(), "the main thread did not exit");
  collect_until_reaped(0);
  CHECK(tes_late_heap_count() == 0, "%zu late heaps left after the main thread ended", tes_late_heap_count());
  size_t broken = 0;
  for (int i = 0; i < MAIN_BLOCKS; i++) {
    for (size_t j = 0; j < 1000; j++) broken += main_blocks[i][j] != (unsigned char)i;
    free(main_blocks[i]);
  }
  for (size_t j = 0; j < 100; j++) broken += main_heap_block[j] != 0x5a;
  free(main_heap_block);
  CHECK(broken == 0, "%zu bytes of the main thread's blocks changed", broken);
  tes_stats_t st;
  tes_stats_get(&st);
  CHECK(st.threads_exited == 1, "threads exited %llu (want the main thread)", (unsigned long long)st.threads_exited);
  exit(unit_finish("main_exit"));
}
static void run_main_exit(void) {
  for (int i = 0; i < MAIN_BLOCKS; i++) {
    main_blocks[i] = malloc(1000);
    REQUIRE(main_blocks[i] != NULL, "malloc");
    memset(main_blocks[i], i & 0xff, 1000);
  }
  tes_heap_t *heap = tes_heap_new();
  REQUIRE(heap != NULL, "tes_heap_new");
  main_heap_block = tes_heap_malloc(heap, 100);
  REQUIRE(main_heap_block != NULL, "tes_heap_malloc");
  memset(main_heap_block, 0x5a, 100);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, main_exit_worker, NULL) == 0, "pthread_create");
  pthread_exit(NULL); /* no tes_heap_destroy, no tes_heap_delete */
}

/* A thread that left a first-class heap waits on the late list until some
 * thread reaps it; a fork in between gave the child a copy of the list
 * without the heap (the child drops other threads' late heaps: they may
 * have been mid-allocation), so the child kept the thread's whole heap for
 * good: 20 MB of blocks freed there stayed committed after malloc_trim, and
 * the thread never counted as exited. */
enum { FORK_BLOCKS = 4000 };
static unsigned char *fork_blocks[FORK_BLOCKS];
static long fork_thread_tid;
static void *leave_heap_thread(void *arg) {
  (void)arg;
  fork_thread_tid = tes_os_thread_id();
  for (int i = 0; i < FORK_BLOCKS; i++) {
    fork_blocks[i] = malloc(1000);
    if (fork_blocks[i] != NULL) memset(fork_blocks[i], i & 0xff, 1000);
  }
  tes_heap_t *heap = tes_heap_new();
  if (heap != NULL) free(tes_heap_malloc(heap, 100)); /* the heap itself is left */
  return NULL;
}
static void run_fork_late(void) {
  free(malloc(16));
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, leave_heap_thread, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  for (int i = 0; i < FORK_BLOCKS; i++) REQUIRE(fork_blocks[i] != NULL, "malloc");
  /* Gone for the kernel too (the task can outlive the join by a moment). */
  for (int i = 0; i < 2000 && tes_os_thread_alive(fork_thread_tid); i++) usleep(1000);
  REQUIRE(!tes_os_thread_alive(fork_thread_tid), "the thread did not end");
  REQUIRE(tes_late_heap_count() == 1, "%zu late heaps before the fork (want the thread's)", tes_late_heap_count());
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    size_t broken = 0;
    for (int i = 0; i < FORK_BLOCKS; i++) {
      for (size_t j = 0; j < 1000; j++) broken += fork_blocks[i][j] != (unsigned char)(i & 0xff);
      free(fork_blocks[i]);
    }
    tes_collect(true);
    tes_stats_t st;
    tes_stats_get(&st);
    CHECK(broken == 0, "child: %zu bytes of the thread's blocks changed", broken);
    CHECK(st.threads_exited + 1 == st.threads_started, "child: threads started %llu, exited %llu (want started - 1)",
          (unsigned long long)st.threads_started, (unsigned long long)st.threads_exited);
    CHECK(st.heaps_abandoned > 0, "child: the thread's heap was never abandoned");
    int rc = unit_finish("fork_late child");
    fflush(NULL);
    _exit(rc);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status %#x)", (unsigned)status);
  for (int i = 0; i < FORK_BLOCKS; i++) free(fork_blocks[i]);
}

/* A thread's default heap counts its first-class heaps not destroyed or
 * deleted yet (thread exit deletes the ones left, and waits on the late
 * list while any are). Another thread may destroy or delete one while the
 * thread makes more: the count was a plain uint32_t, and the two
 * read-modify-writes lost updates (300,000 heaps: 155 to 3,203 left
 * counted after every one was gone; a count too low leaves a heap
 * undeleted at the thread's exit, naming a default heap struct the pool
 * hands to the next thread). */
enum { FC_HEAPS = 300000, FC_RING = 64 };
static _Atomic(tes_heap_t *) fc_ring[FC_RING];
static atomic_bool fc_done;
static void *fc_dropper(void *arg) {
  (void)arg;
  unsigned long n = 0;
  for (;;) {
    bool done = atomic_load(&fc_done);
    for (int i = 0; i < FC_RING; i++) {
      tes_heap_t *h = atomic_exchange(&fc_ring[i], NULL);
      if (h == NULL) continue;
      if (n++ % 2) tes_heap_destroy(h);
      else tes_heap_delete(h);
    }
    if (done) return NULL;
  }
}
static void run_fc_count(void) {
  tes_heap_t *mine = tes_thread_heap_init();
  REQUIRE(mine != NULL, "thread heap");
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, fc_dropper, NULL) == 0, "pthread_create");
  for (int n = 0; n < FC_HEAPS; n++) {
    tes_heap_t *h = tes_heap_new();
    REQUIRE(h != NULL, "tes_heap_new");
    tes_heap_t *empty = NULL;
    while (!atomic_compare_exchange_weak(&fc_ring[n % FC_RING], &empty, h)) empty = NULL;
  }
  atomic_store(&fc_done, true);
  pthread_join(t, NULL);
  unsigned counted = atomic_load(&mine->first_class_heaps);
  CHECK(counted == 0, "%u first-class heaps counted after all %d were destroyed or deleted", counted, FC_HEAPS);
}

/* tes_heap_delete from another thread while the heap's thread frees its
 * blocks (they stay valid through a delete, and free is allowed from any
 * thread). The owner's frees of its heaps' blocks are local, without
 * atomics; the delete moved the pages to the deleting thread's heap under
 * them: "invalid free" aborts, segfaults, or blocks lost for good (68 MB
 * still counted in use after 2,000 rounds, with no block live). */
enum { DEL_ROUNDS = 1000, DEL_BLOCKS = 3000 };
static _Atomic(tes_heap_t *) del_heap;
static atomic_int del_done;
static void *del_deleter(void *arg) {
  (void)arg;
  for (int r = 0; r < DEL_ROUNDS; r++) {
    tes_heap_t *h;
    while ((h = atomic_exchange(&del_heap, NULL)) == NULL) sched_yield();
    tes_heap_delete(h);
    void *x[64];
    for (int i = 0; i < 64; i++) x[i] = malloc(16 + (size_t)i * 24); /* pages the deleter's heap uses */
    for (int i = 0; i < 64; i++) free(x[i]);
    atomic_fetch_add(&del_done, 1);
  }
  return NULL;
}
static void run_fc_delete_mt(void) {
  static unsigned char *blocks[DEL_BLOCKS];
  free(malloc(1));
  tes_collect(true);
  tes_stats_t before, after;
  tes_stats_get(&before);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, del_deleter, NULL) == 0, "pthread_create");
  int bad = 0;
  for (int r = 0; r < DEL_ROUNDS; r++) {
    tes_heap_t *h = tes_heap_new();
    REQUIRE(h != NULL, "tes_heap_new");
    for (int i = 0; i < DEL_BLOCKS; i++) {
      size_t n = 16 + (size_t)(i * 37) % 2000;
      blocks[i] = tes_heap_malloc(h, n);
      REQUIRE(blocks[i] != NULL, "tes_heap_malloc");
      memset(blocks[i], (i + r) & 0xff, n);
    }
    atomic_store(&del_heap, h);
    for (int i = 0; i < DEL_BLOCKS; i++) {
      size_t n = 16 + (size_t)(i * 37) % 2000;
      for (size_t k = 0; k < n; k++) bad += blocks[i][k] != (unsigned char)((i + r) & 0xff);
      free(blocks[i]);
    }
    while (atomic_load(&del_done) <= r) sched_yield();
  }
  pthread_join(t, NULL);
  CHECK(bad == 0, "%d bytes of live blocks changed under a delete", bad);
  tes_collect(true);
  tes_stats_get(&after);
  CHECK(after.in_use.current <= before.in_use.current + 4096, "in use %lld bytes after, %lld before: blocks lost",
        (long long)after.in_use.current, (long long)before.in_use.current);
}

/* Fork handlers that run while libtessera holds its locks. */
static void *handler_blocks[6];
static void allocate_in_handler(int slot) {
  handler_blocks[slot] = malloc(300000); /* a large block: segment and large-list locks */
  handler_blocks[slot + 1] = malloc(40);
  memset(handler_blocks[slot], slot, 300000);
}
static void early_prepare(void) { allocate_in_handler(0); }
static void early_parent(void) { allocate_in_handler(2); }
static void early_child(void) { allocate_in_handler(4); }
static int early_handlers_wanted;
static void register_early(int argc, char **argv, char **envp) {
  /* Before libtessera's constructor (every constructor runs after the
   * executable's preinit array): our prepare handler then runs after its,
   * and our parent/child handlers before its. */
  (void)envp;
  early_handlers_wanted = argc > 1 && strcmp(argv[1], "atfork") == 0;
  if (early_handlers_wanted) pthread_atfork(early_prepare, early_parent, early_child);
}
__attribute__((section(".preinit_array"), used)) static void (*const register_early_entry)(int, char **, char **) = register_early;

static void *fork_worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 20000; i++) free(malloc((size_t)(i % 200) * 16 + 8));
  return NULL;
}
static void run_atfork(void) {
  REQUIRE(early_handlers_wanted, "handlers not registered");
  alarm(30); /* a deadlock fails here */
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, fork_worker, NULL) == 0, "pthread_create");
  for (int round = 0; round < 10; round++) {
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
      int ok = handler_blocks[4] != NULL && handler_blocks[5] != NULL;
      char *p = malloc(1 << 20);
      ok = ok && p != NULL;
      free(p);
      _exit(ok ? 0 : 1);
    }
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %#x", round, status);
    CHECK(handler_blocks[0] && handler_blocks[1] && handler_blocks[2] && handler_blocks[3],
          "handler allocations failed");
    for (int i = 0; i < 4; i++) free(handler_blocks[i]);
  }
  pthread_join(t, NULL);
  alarm(0);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    static const char *const modes[] = {"late_alloc", "late_free", "keys_gone", "atfork", "main_exit", "fork_late", "fc_count",
                                        "fc_delete_mt"};
    return run_modes_in_fresh_processes("unit_lifecycle", argv, modes, sizeof modes / sizeof modes[0]) ? 1 : 0;
  }
  const char *mode = argv[1];
  if (!strcmp(mode, "late_alloc")) run_late(1);
  else if (!strcmp(mode, "late_free")) run_late(0);
  else if (!strcmp(mode, "keys_gone")) run_keys_gone();
  else if (!strcmp(mode, "atfork")) run_atfork();
  else if (!strcmp(mode, "main_exit")) run_main_exit();
  else if (!strcmp(mode, "fork_late")) run_fork_late();
  else if (!strcmp(mode, "fc_count")) run_fc_count();
  else if (!strcmp(mode, "fc_delete_mt")) run_fc_delete_mt();
  else REQUIRE(0, "unknown mode %s", mode);
  return unit_finish(mode);
}
