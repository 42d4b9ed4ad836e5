/* test_fit_threads.c — multi-threaded stress of ts_malloc_lock/ts_free_lock
 * and ts_malloc_nolock/ts_free_nolock. Threads allocate blocks of mixed
 * sizes, fill them with a pattern derived from the address, and either free
 * them themselves or trade them through a shared mailbox so that another
 * thread checks and frees them (for nolock: the remote-free path). Threads
 * are created and joined in rounds, so thread heaps are handed back and
 * reused. Every block's contents are verified before it is freed; at the end
 * the heap checker runs and, for nolock, no more thread heaps exist than
 * threads ever ran at once. Also built with -fsanitize=thread
 * (compat.threads_tsan).
 *
 * Workers start and finish at barriers, so the main thread's pthread_create
 * and pthread_join (which use glibc's malloc, and through it sbrk) never run
 * while a worker grows the break: glibc's sbrk is not thread-safe, and the
 * break is one per process (docs/ARCHITECTURE.md, section compat).
 *
 * usage: test_fit_threads [lock|nolock]   (default: both)
 */
#include "fit_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define THREADS 4
#ifndef ROUNDS /* the TSan build passes smaller numbers: it runs ~20x slower */
#define ROUNDS 5
#endif
#ifndef OPS
#define OPS 3000
#endif
#define LOCAL 64
#define MAILBOX 32

static void *(*test_alloc)(size_t);
static void (*test_release)(void *);
static _Atomic(char *) mailbox[MAILBOX];
static atomic_int failures;
static pthread_barrier_t start_gate, end_gate;

static unsigned char pattern(const void *p, size_t i) { return (unsigned char)(((uintptr_t)p >> 4) + i * 13); }

/* A block stores its size in its first 8 bytes, then the pattern. */
static char *make_block(unsigned *seed) {
  unsigned r = (unsigned)rand_r(seed);
  size_t n = r % 8 == 0 ? 8 + (r >> 4) % 70000 : 8 + (r >> 4) % 1500;
  char *p = test_alloc(n);
  if (!p) return NULL;
  memcpy(p, &n, sizeof n);
  for (size_t k = sizeof n; k < n; k++) p[k] = (char)pattern(p, k);
  return p;
}

static void check_and_free(char *p) {
  size_t n;
  memcpy(&n, p, sizeof n);
  for (size_t k = sizeof n; k < n; k++)
    if ((unsigned char)p[k] != pattern(p, k)) {
      atomic_fetch_add(&failures, 1);
      fprintf(stderr, "block %p corrupted at byte %zu\n", (void *)p, k);
      break;
    }
  test_release(p);
}

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
  char *local[LOCAL] = {0};
  pthread_barrier_wait(&start_gate);
  for (int op = 0; op < OPS; op++) {
    int i = rand_r(&seed) % LOCAL;
    if (!local[i]) {
      if (!(local[i] = make_block(&seed))) {
        atomic_fetch_add(&failures, 1);
        fprintf(stderr, "allocation failed\n");
      }
    } else if (rand_r(&seed) % 3 == 0) {
      char *other = atomic_exchange(&mailbox[rand_r(&seed) % MAILBOX], local[i]);
      local[i] = NULL;
      if (other) check_and_free(other);
    } else {
      check_and_free(local[i]);
      local[i] = NULL;
    }
  }
  for (int i = 0; i < LOCAL; i++)
    if (local[i]) check_and_free(local[i]);
  pthread_barrier_wait(&end_gate);
  return NULL;
}

static int run(const char *which) {
  if (strcmp(which, "lock") == 0) {
    test_alloc = ts_malloc_lock;
    test_release = ts_free_lock;
  } else {
    test_alloc = ts_malloc_nolock;
    test_release = ts_free_nolock;
  }
  CHECK(pthread_barrier_init(&start_gate, NULL, THREADS) == 0);
  CHECK(pthread_barrier_init(&end_gate, NULL, THREADS) == 0);
  for (int round = 0; round < ROUNDS; round++) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
      CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(round * THREADS + i + 1)) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  }
  for (int i = 0; i < MAILBOX; i++) {
    char *p = atomic_exchange(&mailbox[i], NULL);
    if (p) check_and_free(p);
  }
  CHECK(atomic_load(&failures) == 0);
  CHECK_HEAP();
  if (strcmp(which, "nolock") == 0) {
    unsigned used = 0;
    for (unsigned i = 0; i < FIT_MAX_THREAD_ARENAS; i++)
      if (fit_arena_by_id(FIT_ARENA_THREAD0 + i)->index_kind != FIT_INDEX_NONE) used++;
    printf("thread heaps used: %u for %d threads in %d rounds\n", used, ROUNDS * THREADS, ROUNDS);
    CHECK(used >= 1 && used <= THREADS);
  }
  printf("ok   threads %s\n", which);
  return 0;
}

/* A block freed twice by a thread that does not own it, before its owner
 * takes it back. Before, it went onto the owner's remote stack twice and
 * linked to itself: the owner's next ts_malloc_nolock looped for ever, or
 * crashed when the block's predecessor was free. */
static char *rdf_blocks[3];
static pthread_barrier_t rdf_gate;
/* Three blocks of 100 bytes, each the physical successor of the one before.
 * The thread heap may be one an earlier thread left with holes, so not any
 * three mallocs will do: allocate until a chain shows up (the rest are
 * `spare`, freed at the end). */
enum { RDF_TRIES = 256 };
static char *rdf_spare[RDF_TRIES];
static int rdf_spares;
static void rdf_find_chain(void) {
  static char *got[RDF_TRIES];
  int n = 0, chain = -1;
  while (chain < 0 && n < RDF_TRIES) {
    CHECK((got[n] = ts_malloc_nolock(100)) != NULL);
    n++;
    for (int y = 0; y < n && chain < 0; y++) { /* a middle block with both neighbours among got */
      int x = -1, z = -1;
      for (int k = 0; k < n; k++) {
        if (fit_next_phys(fit_header_of(got[k])) == fit_header_of(got[y])) x = k;
        if (fit_next_phys(fit_header_of(got[y])) == fit_header_of(got[k])) z = k;
      }
      if (x >= 0 && z >= 0) {
        rdf_blocks[0] = got[x], rdf_blocks[1] = got[y], rdf_blocks[2] = got[z];
        chain = y;
      }
    }
  }
  CHECK(chain >= 0); /* no three adjacent blocks in RDF_TRIES mallocs */
  rdf_spares = 0;
  for (int i = 0; i < n; i++)
    if (got[i] != rdf_blocks[0] && got[i] != rdf_blocks[1] && got[i] != rdf_blocks[2]) rdf_spare[rdf_spares++] = got[i];
}

static void *rdf_owner(void *arg) {
  int free_predecessor = (int)(uintptr_t)arg;
  rdf_find_chain();
  for (int i = 0; i < 3; i++) memset(rdf_blocks[i], 'a' + i, 100);
  if (free_predecessor) ts_free_nolock(rdf_blocks[0]);
  pthread_barrier_wait(&rdf_gate); /* the main thread frees the middle block twice */
  pthread_barrier_wait(&rdf_gate);
  for (int i = 0; i < 100; i++) { /* drains the remote stack */
    char *q = ts_malloc_nolock(64);
    CHECK(q != NULL);
    memset(q, 'q', 64);
    ts_free_nolock(q);
  }
  for (int k = free_predecessor ? 2 : 0; k < 3; k += 2) /* the blocks still live */
    for (int i = 0; i < 100; i++) CHECK(rdf_blocks[k][i] == 'a' + k);
  CHECK_HEAP();
  if (!free_predecessor) ts_free_nolock(rdf_blocks[0]);
  ts_free_nolock(rdf_blocks[2]);
  for (int i = 0; i < rdf_spares; i++) ts_free_nolock(rdf_spare[i]);
  CHECK_HEAP();
  return NULL;
}

/* Call ts_free_nolock(block) `times` times with stderr captured; true if
 * the report of a double free came out. */
static bool frees_report_double_free(void *block, int times) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  int saved = dup(2);
  dup2(fds[1], 2);
  close(fds[1]);
  for (int i = 0; i < times; i++) ts_free_nolock(block);
  dup2(saved, 2);
  close(saved);
  char msg[512];
  ssize_t n = read(fds[0], msg, sizeof msg - 1);
  msg[n > 0 ? n : 0] = 0;
  close(fds[0]);
  return strstr(msg, "ts_free_nolock") != NULL && strstr(msg, "double free; ignored") != NULL;
}

static int run_remote_double_free(void) {
  for (int free_predecessor = 0; free_predecessor < 2; free_predecessor++) {
    alarm(30); /* a drain that loops for ever fails here, not at the CTest timeout */
    CHECK(pthread_barrier_init(&rdf_gate, NULL, 2) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, rdf_owner, (void *)(uintptr_t)free_predecessor) == 0);
    pthread_barrier_wait(&rdf_gate);
    CHECK(frees_report_double_free(rdf_blocks[1], 2));
    pthread_barrier_wait(&rdf_gate);
    CHECK(pthread_join(t, NULL) == 0);
    pthread_barrier_destroy(&rdf_gate);
    alarm(0);
    printf("ok   remote double free%s\n", free_predecessor ? ", predecessor free" : "");
  }
  return 0;
}

/* A block freed by another thread after it is already free: freed by its
 * owner (case 0), or freed remotely and taken back by its owner (case 1).
 * The remote path looked only at remote_freed (clear again once the owner
 * has the block), not at the FREE flag, so the second free pushed a free
 * block on the owner's stack: the stack's link was written over the free
 * block's index links (its bin's list then pointed into the stack), and
 * the owner's drain freed it again. It is reported as the ff_/bf_/ts_lock
 * frees report a double free, and ignored. */
static char *fdf_block, *fdf_neighbours[2];
static pthread_barrier_t fdf_gate;
static void *fdf_owner(void *arg) {
  int remote_first = (int)(uintptr_t)arg;
  fdf_neighbours[0] = ts_malloc_nolock(200); /* keeps the block from coalescing */
  fdf_block = ts_malloc_nolock(200);
  fdf_neighbours[1] = ts_malloc_nolock(200);
  CHECK(fdf_block && fdf_neighbours[0] && fdf_neighbours[1]);
  if (!remote_first) ts_free_nolock(fdf_block);
  pthread_barrier_wait(&fdf_gate); /* case 1: the main thread frees it */
  pthread_barrier_wait(&fdf_gate);
  if (remote_first) { /* take it back: it is free in this heap now */
    char *q = ts_malloc_nolock(8);
    CHECK(q != NULL);
    ts_free_nolock(q);
  }
  pthread_barrier_wait(&fdf_gate); /* the main thread frees it (again) */
  pthread_barrier_wait(&fdf_gate);
  CHECK_HEAP();
  char *got[64];
  for (int i = 0; i < 64; i++) { /* takes back whatever was pushed, reuses the hole */
    got[i] = ts_malloc_nolock(200);
    CHECK(got[i] != NULL);
    memset(got[i], 'g', 200);
  }
  for (int i = 0; i < 64; i++)
    for (int j = i + 1; j < 64; j++) CHECK(got[i] != got[j]);
  CHECK_HEAP();
  for (int i = 0; i < 64; i++) ts_free_nolock(got[i]);
  ts_free_nolock(fdf_neighbours[0]);
  ts_free_nolock(fdf_neighbours[1]);
  CHECK_HEAP();
  return NULL;
}

static int run_free_block_double_free(void) {
  for (int remote_first = 0; remote_first < 2; remote_first++) {
    alarm(30);
    CHECK(pthread_barrier_init(&fdf_gate, NULL, 2) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fdf_owner, (void *)(uintptr_t)remote_first) == 0);
    pthread_barrier_wait(&fdf_gate);
    if (remote_first) ts_free_nolock(fdf_block);
    pthread_barrier_wait(&fdf_gate);
    pthread_barrier_wait(&fdf_gate);
    CHECK(frees_report_double_free(fdf_block, 1));
    pthread_barrier_wait(&fdf_gate);
    CHECK(pthread_join(t, NULL) == 0);
    pthread_barrier_destroy(&fdf_gate);
    alarm(0);
    printf("ok   double free of a free block by another thread%s\n",
           remote_first ? " (it freed it first)" : " (its owner freed it first)");
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "remote_double_free") == 0) return run_remote_double_free();
  if (argc > 1 && strcmp(argv[1], "free_block_double_free") == 0) return run_free_block_double_free();
  if (argc > 1) return run(argv[1]);
  return run("lock") || run("nolock") || run_remote_double_free() || run_free_block_double_free();
}
