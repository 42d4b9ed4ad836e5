/* api_cancel.c — a deferred pthread_cancel that is pending when a thread
 * enters the allocator must not act inside it.
 *
 * The allocator holds locks while it may write a message (with
 * TESSERA_VERBOSE, "out of memory" is noted under the heap's purge lock).
 * write() is a cancellation point: the cancel acted there and unwound the
 * thread with the lock held, so its own exit (which collects its heap under
 * that lock) spun for ever, and so did a later fork. Here a worker with a
 * cancel pending allocates until malloc fails under RLIMIT_AS; it must come
 * back from malloc with NULL, reach its exit, and the process must still be
 * able to trim and fork. Runs in a child (RLIMIT_AS), under a 5 s join. */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/wait.h>

enum { MAX_BLOCKS = 1 << 20 };
static atomic_int go, returned_null;
static void **blocks;
static size_t block_count;

static void *worker(void *unused) {
  (void)unused;
  while (!atomic_load(&go)) { /* no cancellation point: the cancel stays pending */
  }
  while (block_count < MAX_BLOCKS) {
    void *p = malloc(4000);
    if (p == NULL) {
      atomic_store(&returned_null, 1);
      break;
    }
    blocks[block_count++] = p;
  }
  return NULL;
}

static int child(void) {
  tes_option_set(TES_OPTION_VERBOSE, 1);
  blocks = calloc(MAX_BLOCKS, sizeof *blocks);
  if (blocks == NULL) return 3;
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0) return 3;
  struct rlimit limit = {(rlim_t)api_vsz_bytes() + ((rlim_t)64 << 20), RLIM_INFINITY};
  if (setrlimit(RLIMIT_AS, &limit) != 0) return 77;
  pthread_cancel(t);
  atomic_store(&go, 1);
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 5;
  if (pthread_timedjoin_np(t, NULL, &deadline) != 0) {
    printf("the worker did not finish its exit within 5 s\n");
    fflush(stdout);
    _exit(1);
  }
  limit.rlim_cur = RLIM_INFINITY;
  setrlimit(RLIMIT_AS, &limit);
  printf("worker: %zu blocks, malloc %s\n", block_count, atomic_load(&returned_null) ? "returned NULL" : "never failed");
  for (size_t i = 0; i < block_count; i++) free(blocks[i]);
  malloc_trim(0);
  pid_t pid = fork();
  if (pid == 0) {
    free(malloc(10));
    _exit(0);
  }
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 2;
  return atomic_load(&returned_null) ? 0 : 4;
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  REQUIRE(api_malloc_is_linked_tessera(), "api_cancel must be linked with libtessera");
  fflush(stdout);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    alarm(30); /* a hang in trim or fork ends as SIGALRM, not a stuck test */
    _exit(child());
  }
  int status;
  REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    printf("SKIP: setrlimit(RLIMIT_AS) failed\n");
    return 77;
  }
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %s %d (1: stuck in its exit, 2: fork failed, 4: malloc "
        "never failed)", WIFSIGNALED(status) ? "signal" : "exit",
        WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  return api_finish("api_cancel");
}
