/* api_cancel.c — a deferred pthread_cancel that is pending when a thread
 * enters the allocator must not act inside it (three scenarios, below).
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

#include <fcntl.h>
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

/* The reports write to the caller's stream while they hold the report
 * scratch (malloc_info, tes_stats_print, tes_heap_report), and fprintf,
 * fputs and write are cancellation points: a reporter cancelled while its
 * write waited on a full pipe was unwound with the scratch locked, and the
 * next mallinfo2 (or fork) spun for ever. Here the cancel comes while the
 * reporter waits on a pipe nobody reads yet; the pipe is then drained, the
 * reporter must end (at its pthread_testcancel), and mallinfo2, malloc_info
 * and fork must still work. */
static FILE *report_sink;
static int report_kind;

static void *reporter(void *unused) {
  (void)unused;
  for (;;) {
    if (report_kind == 0) malloc_info(0, report_sink);
    else if (report_kind == 1) tes_stats_print(report_sink);
    else tes_heap_report(report_sink);
    pthread_testcancel();
  }
  return NULL;
}

static int child_report(int kind) {
  int fds[2];
  if (pipe(fds) != 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) return 3;
  report_sink = fdopen(fds[1], "w");
  if (report_sink == NULL) return 3;
  setvbuf(report_sink, NULL, _IONBF, 0);
  report_kind = kind;
  pthread_t t;
  if (pthread_create(&t, NULL, reporter, NULL) != 0) return 3;
  api_sleep_ms(100); /* the pipe is full by now: the reporter waits in write() */
  pthread_cancel(t);
  static char drain[1 << 16];
  double deadline = api_now_seconds() + 5;
  while (pthread_tryjoin_np(t, NULL) != 0) {
    if (api_now_seconds() > deadline) {
      printf("report %d: the cancelled reporter did not end within 5 s\n", kind);
      return 1;
    }
    if (read(fds[0], drain, sizeof drain) <= 0) api_sleep_ms(1);
  }
  struct mallinfo2 info = mallinfo2(); /* spun for ever when the scratch stayed locked */
  FILE *null = fopen("/dev/null", "w");
  if (null == NULL || malloc_info(0, null) != 0) return 3;
  fclose(null);
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 2;
  return info.arena > 0 ? 0 : 5;
}

/* A heap whose thread left first-class heaps waits on the late list until
 * the thread is gone, and the reaper (malloc_trim, a thread's first malloc,
 * fork) asks, with the list's lock held; for the main thread, whose task
 * stays a zombie after pthread_exit, it reads /proc/self/stat. open, read
 * and close are cancellation points: a reaper with a cancel pending was
 * unwound there with the lock taken, and the next malloc_trim or fork spun
 * for ever. Here the child's main thread leaves a heap and calls
 * pthread_exit; a worker cancels itself and calls malloc_trim, which must
 * return (the cancel acts at its pthread_testcancel); the monitor then
 * trims and forks. */
static bool main_thread_gone(void) {
  char text[512];
  int fd = open("/proc/self/stat", O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof text - 1);
  if (fd >= 0) close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  const char *p = strrchr(text, ')');
  return p != NULL && (p[2] == 'Z' || p[2] == 'X');
}

static atomic_int reaper_ready, reaper_trimmed;

static void *reaper(void *unused) {
  (void)unused;
  free(malloc(10)); /* its heap made now: a thread's first malloc reaps too */
  atomic_store(&reaper_ready, 1);
  while (!main_thread_gone()) api_sleep_ms(1);
  pthread_cancel(pthread_self()); /* pending: acts at the next cancellation point */
  malloc_trim(0);                 /* reaps the main thread's late heap */
  atomic_store(&reaper_trimmed, 1);
  pthread_testcancel();
  return NULL;
}

static void *reap_monitor(void *arg) {
  pthread_t worker = *(pthread_t *)arg;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 5;
  void *result = NULL;
  if (pthread_timedjoin_np(worker, &result, &deadline) != 0) _exit(1);
  malloc_trim(0); /* spun for ever on the lock the cancelled reaper left taken */
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) _exit(2);
  exit(result == PTHREAD_CANCELED && atomic_load(&reaper_trimmed) ? 0 : 4);
}

static void child_reap(void) {
  if (tes_heap_new() == NULL) _exit(3); /* left to the thread's exit: its heap waits on the late list */
  static pthread_t worker, monitor;
  if (pthread_create(&worker, NULL, reaper, NULL) != 0 || pthread_create(&monitor, NULL, reap_monitor, &worker) != 0)
    _exit(3);
  while (!atomic_load(&reaper_ready)) api_sleep_ms(1);
  pthread_exit(NULL);
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
  static const char *const reports[] = {"malloc_info", "tes_stats_print", "tes_heap_report"};
  for (int kind = 0; kind < 3; kind++) {
    fflush(stdout);
    pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
      alarm(30); /* mallinfo2 or fork spinning on the scratch ends as SIGALRM */
      _exit(child_report(kind));
    }
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reporter cancelled in %s: %s %d (SIGALRM 14: a later "
          "mallinfo2 or fork spun on the report scratch; 1: the reporter did not end)", reports[kind],
          WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  fflush(stdout);
  pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    alarm(10); /* malloc_trim or fork spinning on the late list's lock ends as SIGALRM */
    child_reap();
  }
  REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reaper cancelled: %s %d (SIGALRM 14: a later malloc_trim "
        "or fork spun on the late list's lock; 1: the reaper did not end; 4: it was not cancelled after its trim)",
        WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  return api_finish("api_cancel");
}
