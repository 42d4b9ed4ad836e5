/* test_fit_fork.c — fork() while another thread is inside the allocator.
 * A worker thread keeps allocating and freeing through ts_malloc_lock (so it
 * holds the locked arena's mutex most of the time) and ts_malloc_nolock with
 * blocks large enough to keep growing the break (so it often holds the break
 * lock); the main thread forks repeatedly, and each child must be able to
 * allocate through every variant at once. Without the pthread_atfork
 * handlers a child inherits a held lock and hangs; the alarm turns that hang
 * into a failure.
 */
#include "fit_test.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define FORKS 40

static atomic_int stop;

static void *worker(void *arg) {
  (void)arg;
  static char *keep[64];
  unsigned i = 0;
  while (!atomic_load(&stop)) {
    char *p = ts_malloc_lock(64 + i % 512);
    CHECK(p);
    memset(p, 1, 64);
    ts_free_lock(p);
    unsigned k = i % 64;
    if (keep[k]) ts_free_nolock(keep[k]);
    keep[k] = ts_malloc_nolock(4096 + (i * 977) % 200000);
    CHECK(keep[k]);
    i++;
  }
  for (int k = 0; k < 64; k++) ts_free_nolock(keep[k]);
  return NULL;
}

static void child(void) {
  alarm(10);
  for (size_t v = 0; v < FIT_TEST_API_COUNT; v++) {
    char *p = fit_test_apis[v].alloc(300000);
    if (!p) _exit(3);
    memset(p, 2, 300000);
    fit_test_apis[v].release(p);
  }
  _exit(0);
}

int main(void) {
  /* Use every variant once so the fork handlers are registered. */
  for (size_t v = 0; v < FIT_TEST_API_COUNT; v++) fit_test_apis[v].release(fit_test_apis[v].alloc(16));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
  int failed = 0;
  for (int f = 0; f < FORKS; f++) {
    usleep(2000);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) child();
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed++;
      if (WIFSIGNALED(status))
        printf("fork %d: child killed by signal %d%s\n", f, WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? " (hung on a lock)" : "");
      else
        printf("fork %d: child exited %d\n", f, WEXITSTATUS(status));
    }
  }
  atomic_store(&stop, 1);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK_HEAP();
  printf("%d of %d children failed\n", failed, FORKS);
  return failed ? 1 : 0;
}
