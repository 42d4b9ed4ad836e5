/* unit_fork.c — fork in a multi-threaded process (src/init.c): while four
 * threads allocate and free (and so hold allocator locks now and then), the
 * main thread forks 50 times; each child must allocate, free, create a
 * thread that allocates, and exit 0 within the alarm. A child that hangs on
 * a lock held at fork time is killed by SIGALRM and fails the test. */
#include "unit_common.h"

#include "internal.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_bool stop;

static void *churn(void *arg) {
  unsigned x = (unsigned)(uintptr_t)arg;
  void *keep[64] = {0};
  while (!atomic_load(&stop)) {
    x = x * 1103515245u + 12345u;
    size_t i = x % 64, size = (x >> 8) % 3 == 0 ? (size_t)(x % 400000) : (size_t)(x % 2000);
    tes_free(keep[i]);
    keep[i] = tes_malloc(size);
  }
  for (int i = 0; i < 64; i++) tes_free(keep[i]);
  return NULL;
}

static void *child_thread(void *arg) {
  void *p = tes_malloc(1000);
  tes_free(p);
  return arg;
}

int main(void) {
  pthread_t threads[4];
  for (int i = 0; i < 4; i++)
    REQUIRE(pthread_create(&threads[i], NULL, churn, (void *)(uintptr_t)(i + 1)) == 0, "pthread_create");
  int failures = 0;
  for (int round = 0; round < 50; round++) {
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
      alarm(10);
      for (int i = 0; i < 1000; i++) tes_free(tes_malloc((size_t)i * 37 % 300000));
      pthread_t t;
      if (pthread_create(&t, NULL, child_thread, NULL) != 0) _exit(3);
      pthread_join(t, NULL);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures++;
      fprintf(stderr, "round %d: child ended with status %#x%s\n", round, status,
              WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? " (hung: killed by the alarm)" : "");
    }
    usleep(1000);
  }
  atomic_store(&stop, true);
  for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  CHECK(failures == 0, "%d of 50 children failed", failures);
  return unit_finish("unit_fork");
}
