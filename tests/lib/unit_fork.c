/* unit_fork.c — fork in a multi-threaded process (src/init.c): while four
 * threads allocate and free (and so hold allocator locks now and then), the
 * main thread forks 50 times; each child must allocate, free, create a
 * thread that allocates, and exit 0 within the alarm. A child that hangs on
 * a lock held at fork time is killed by SIGALRM and fails the test. First,
 * a child must not wait for a remote free that was in flight at the fork
 * (a page left tagged FREEING by a thread the child does not have). */
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

/* A remote free in flight at the fork: another thread had tagged a page of
 * the forking thread FREEING (it was handing a block to the page's heap)
 * and does not exist in the child. The child's heap must not wait for it:
 * filling that page (which tags it for the full queue) hung for ever. The
 * tag is set by hand here, as the other thread would have left it. */
static int stale_freeing_tag(void) {
  enum { SIZE = 48, COUNT = 4096 };
  void *probe = tes_malloc(SIZE);
  tes_page_t *page = tes_page_of(tes_segment_of(probe), probe);
  uintptr_t before = atomic_load(&page->xthread_free);
  atomic_store(&page->xthread_free, (before & ~TES_TF_MASK) | TES_TF_FREEING);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    alarm(10);
    static void *blocks[COUNT]; /* more than the page holds: it fills up */
    for (int i = 0; i < COUNT; i++) blocks[i] = tes_malloc(SIZE);
    for (int i = 0; i < COUNT; i++) tes_free(blocks[i]);
    _exit(0);
  }
  atomic_store(&page->xthread_free, before); /* the parent's "other thread" finishes */
  int status = 0;
  waitpid(pid, &status, 0);
  tes_free(probe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  fprintf(stderr, "stale FREEING tag: child ended with status %#x%s\n", status,
          WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? " (hung: killed by the alarm)" : "");
  return 1;
}

int main(void) {
  CHECK(stale_freeing_tag() == 0, "the child waited for a remote free of a thread it does not have");
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
