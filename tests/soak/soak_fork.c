/* soak_fork.c — fork from a multi-threaded process, then allocate in the
 * child, many times over.
 *
 *   soak_fork [FORKS [WORKER_THREADS]]     (default 200 4)
 *
 * Worker threads allocate, verify and free without pause (small, medium and
 * large blocks, so they are inside the allocator's slow paths and locks much
 * of the time) while the main thread forks. Each child, under a 10 s alarm
 * (a deadlocked child dies of SIGALRM and fails the test): checks blocks
 * the parent allocated before the fork, allocates and frees thousands of
 * blocks, starts a thread that allocates too, frees the inherited blocks,
 * and exits 0 only if every content check passed. The parent asserts every
 * child exited 0 and its own workers never saw corruption. */
#define _GNU_SOURCE
#include "soak_common.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

enum { INHERITED = 256, MAX_WORKERS = 16 };

static atomic_bool stop_workers;
static atomic_ulong worker_ops;
static atomic_long workers_running;
static unsigned char *inherited[INHERITED];
static size_t inherited_size[INHERITED];

static size_t pick_size(uint64_t r) {
  switch (r & 15) {
    case 0: return 300000 + r % 3000000; /* large */
    case 1: case 2: return 8192 + r % 100000;
    default: return 8 + r % 2000;
  }
}

static void *worker(void *arg) {
  uint64_t rng = (uintptr_t)arg * 2654435761u + 17;
  unsigned char *held[32] = {0};
  size_t held_size[32];
  uint64_t held_seed[32];
  atomic_fetch_add(&workers_running, 1);
  while (!atomic_load_explicit(&stop_workers, memory_order_relaxed)) {
    uint64_t r = soak_rng(&rng);
    int slot = (int)(r >> 40) & 31;
    if (held[slot]) {
      SOAK_CHECK(soak_intact(held[slot], held_size[slot] < 256 ? held_size[slot] : 256,
                             held_seed[slot]));
      soak_free(held[slot]);
    }
    held_size[slot] = pick_size(r);
    held_seed[slot] = r;
    held[slot] = soak_malloc(held_size[slot]);
    SOAK_CHECK(held[slot] != NULL);
    soak_fill(held[slot], held_size[slot] < 256 ? held_size[slot] : 256, r);
    /* Leave the forking thread some processor on a 2-core machine. */
    if ((atomic_fetch_add_explicit(&worker_ops, 1, memory_order_relaxed) & 63) == 0) sched_yield();
  }
  for (int i = 0; i < 32; i++) soak_free(held[i]);
  return NULL;
}

static void *child_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 500; i++) {
    unsigned char *p = soak_malloc(16 + (size_t)i * 8);
    if (!p) soak_die("fork child thread: malloc returned NULL\n");
    soak_fill(p, 16 + (size_t)i * 8, (uint64_t)i);
    if (!soak_intact(p, 16 + (size_t)i * 8, (uint64_t)i)) soak_die("child thread: corrupt\n");
    soak_free(p);
  }
  return NULL;
}

static void child_main(int round) {
  alarm(10);
  for (int i = 0; i < INHERITED; i++)
    if (!soak_intact(inherited[i], inherited_size[i], (uint64_t)i))
      soak_die("fork child: a block allocated before fork lost its contents\n");
  uint64_t rng = (uint64_t)round * 31 + 7;
  static unsigned char *mine[1000];
  static size_t mine_size[1000];
  for (int i = 0; i < 1000; i++) {
    mine_size[i] = pick_size(soak_rng(&rng)) % 20000 + 1;
    mine[i] = soak_malloc(mine_size[i]);
    if (!mine[i]) soak_die("fork child: malloc returned NULL\n");
    soak_fill(mine[i], mine_size[i], (uint64_t)i + 1000);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, child_thread, NULL) != 0) soak_die("fork child: pthread_create\n");
  if (pthread_join(t, NULL) != 0) soak_die("fork child: pthread_join\n");
  for (int i = 0; i < 1000; i++) {
    if (!soak_intact(mine[i], mine_size[i], (uint64_t)i + 1000)) soak_die("fork child: corrupt\n");
    soak_free(mine[i]);
  }
  for (int i = 0; i < INHERITED; i++) soak_free(inherited[i]);
  _exit(0);
}

int main(int argc, char **argv) {
  long forks = argc > 1 ? atol(argv[1]) : 200;
  long workers = argc > 2 ? atol(argv[2]) : 4;
  if (forks <= 0 || workers < 1 || workers > MAX_WORKERS) {
    fprintf(stderr, "usage: %s [FORKS [WORKERS<=%d]]\n", argv[0], MAX_WORKERS);
    return 2;
  }
  soak_require_tessera();
  for (int i = 0; i < INHERITED; i++) {
    inherited_size[i] = 16 + (size_t)i * 97;
    inherited[i] = soak_malloc(inherited_size[i]);
    SOAK_CHECK(inherited[i] != NULL);
    soak_fill(inherited[i], inherited_size[i], (uint64_t)i);
  }
  pthread_t threads[MAX_WORKERS];
  for (long i = 0; i < workers; i++)
    SOAK_CHECK(pthread_create(&threads[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0);
  /* Fork only once every worker is running its loop. A thread still
   * starting up may be inside the C library's (or a sanitizer runtime's)
   * own allocator, whose locks are not ours to reset in the child: gcc 12's
   * ASan, for one, does not hold its allocator lock across fork, and a child
   * forked during a worker's start-up then deadlocks in ASan's calloc. The
   * test is about libtessera's locks, which the workers exercise from here. */
  while (atomic_load(&workers_running) < workers) sched_yield();
  long ok = 0;
  for (long round = 0; round < forks; round++) {
    fflush(NULL);
    pid_t pid = fork();
    SOAK_CHECK(pid >= 0);
    if (pid == 0) child_main((int)round);
    int status;
    SOAK_CHECK(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status)) {
      fprintf(stderr, "soak_fork: child %ld killed by signal %d%s\n", round, WTERMSIG(status),
              WTERMSIG(status) == SIGALRM ? " (hung: deadlock after fork?)" : "");
      return 1;
    }
    if (WEXITSTATUS(status) != 0) {
      fprintf(stderr, "soak_fork: child %ld exited with %d\n", round, WEXITSTATUS(status));
      return 1;
    }
    ok++;
  }
  atomic_store(&stop_workers, true);
  for (long i = 0; i < workers; i++) SOAK_CHECK(pthread_join(threads[i], NULL) == 0);
  for (int i = 0; i < INHERITED; i++) {
    SOAK_CHECK(soak_intact(inherited[i], inherited_size[i], (uint64_t)i));
    soak_free(inherited[i]);
  }
  printf("soak_fork: %ld forks from a process with %ld allocating threads, %ld children "
         "allocated and exited cleanly; workers did %lu malloc/free pairs meanwhile\n",
         forks, workers, ok, (unsigned long)atomic_load(&worker_ops));
  return 0;
}
