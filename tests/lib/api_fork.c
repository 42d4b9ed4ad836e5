/* api_fork.c — fork() while other threads are inside the allocator.
 *
 * Three background threads allocate, free and pass blocks to each other
 * without pause (so at any instant one of them is likely to hold whatever
 * lock or half-updated list the allocator has). The main thread forks
 * repeatedly; each child at once allocates and frees many blocks of every
 * size range, also from a new thread of its own, checks their contents and
 * exits 0. A child that deadlocks is killed by alarm() (SIGALRM), so a
 * deadlock fails the test instead of hanging it; a corrupted heap fails it
 * by exit status or signal.
 *
 * Standard names only: runs linked with libtessera.a, under LD_PRELOAD, and
 * against glibc. */
#define _GNU_SOURCE
#include "api_check.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

enum { BACKGROUND_THREADS = 3, SHARED_SLOTS = 64 };

static atomic_bool stop_background;
static _Atomic(void *) shared_slots[SHARED_SLOTS];

static void *background(void *arg) {
  uint64_t rng = (uint64_t)(intptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
  while (!atomic_load_explicit(&stop_background, memory_order_relaxed)) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t size = (rng >> 33) % 100 == 0 ? 300000 : 8 + (rng >> 40) % 2000;
    void *p = malloc(size);
    if (p) memset(p, 0x6B, size < 256 ? size : 256);
    /* Swap with a shared slot: the old block is freed by this thread, often
     * one another thread allocated (cross-thread free in flight). */
    void *old = atomic_exchange(&shared_slots[(rng >> 20) % SHARED_SLOTS], p);
    free(old);
    void *q = realloc(NULL, 24 + (rng >> 50) % 500);
    q = realloc(q, 1000 + (rng >> 45) % 5000);
    free(q);
  }
  return NULL;
}

static void *child_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++) {
    void *p = malloc(16 + (size_t)i % 3000);
    if (!p) return (void *)1;
    free(p);
  }
  return NULL;
}

/* What the child does right after fork: must not deadlock, must work. */
static int child_main(void) {
  alarm(5);
  enum { N = 300 };
  void *blocks[N];
  size_t sizes[N];
  for (int i = 0; i < N; i++) {
    sizes[i] = i % 50 == 0 ? 1u << 20 : 1 + (size_t)i * 13 % 4000;
    blocks[i] = malloc(sizes[i]);
    if (!blocks[i]) return 2;
    api_fill(blocks[i], sizes[i]);
  }
  /* Blocks the parent's background threads were handing around are still
   * freeable in the child. */
  for (int i = 0; i < SHARED_SLOTS; i++) free(atomic_exchange(&shared_slots[i], NULL));
  pthread_t t;
  if (pthread_create(&t, NULL, child_thread, NULL) != 0) return 3;
  void *thread_result = NULL;
  pthread_join(t, &thread_result);
  if (thread_result) return 4;
  for (int i = 0; i < N; i++) {
    if (api_verify(blocks[i], sizes[i]) != SIZE_MAX) return 5;
    free(blocks[i]);
  }
  void *aligned = aligned_alloc(4096, 10000);
  if (!aligned || ((uintptr_t)aligned & 4095)) return 6;
  free(aligned);
  return 0;
}

int main(int argc, char **argv) {
  api_require_tessera_if_asked(argc, argv);
  int forks = 60;
  if (argc > 1 && argv[1][0] != '-') forks = atoi(argv[1]);

  pthread_t threads[BACKGROUND_THREADS];
  for (int t = 0; t < BACKGROUND_THREADS; t++)
    REQUIRE(pthread_create(&threads[t], NULL, background, (void *)(intptr_t)(t + 1)) == 0,
            "pthread_create failed");
  api_sleep_ms(20);

  API_GROUP("fork while threads allocate");
  int deadlocked = 0, failed = 0;
  for (int i = 0; i < forks; i++) {
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork failed");
    if (pid == 0) _exit(child_main());
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
      deadlocked++;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed++;
      fprintf(stderr, "fork %d: child %s %d\n", i, WIFEXITED(status) ? "exited" : "killed by signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    /* Let the background threads get back into the allocator. */
    api_sleep_ms(1 + i % 3);
  }
  atomic_store(&stop_background, true);
  for (int t = 0; t < BACKGROUND_THREADS; t++) pthread_join(threads[t], NULL);
  for (int i = 0; i < SHARED_SLOTS; i++) free(atomic_exchange(&shared_slots[i], NULL));
  CHECK(deadlocked == 0, "%d of %d children deadlocked in their first allocations", deadlocked, forks);
  CHECK(failed == 0, "%d of %d children failed", failed, forks);
  /* The parent is still healthy. */
  void *p = malloc(1000);
  CHECK(p != NULL, "parent malloc after forks failed");
  free(p);
  printf("forks=%d deadlocked=%d failed=%d\n", forks, deadlocked, failed);
  return api_finish("api_fork");
}
