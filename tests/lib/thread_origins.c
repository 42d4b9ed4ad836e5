/* thread_origins.c — lib.thread_origins: every way this process can get a
 * second thread clears glibc's __libc_single_threaded before that thread
 * can run, and the allocator's slow paths stay correct when both threads
 * use them at once (review of the single-threaded lock elision, twenty-
 * eighth session, rev28; docs/RELIABILITY.md).
 *
 *   thread_origins ORIGIN
 *
 * ORIGIN is one of pthread, thrd, timer, aio, dlopen (PLUGIN in
 * $THREAD_ORIGINS_PLUGIN: a library whose constructor starts a thread),
 * purge (the allocator's own purge thread: run with
 * TESSERA_PURGE_THREAD=1), fork_single, fork_threaded, spawn, vfork.
 * The allocator trusts the flag (src/os.h, tes_single_threaded): while it
 * is set, its locks are taken by a plain store and its shared
 * read-modify-writes have no lock prefix. So each origin checks, in the new
 * thread before it does anything else, that the flag reads false, and then
 * the new thread and the first one run the large/medium slow paths (the
 * large lock, the hosts' starts, the segment map, the gauges) at once,
 * each block filled with its owner's pattern and checked before its free:
 * a lock that let both in, or a lost update of a shared word, shows up as
 * a wrong byte, a crash or a report. Exits 0 if all holds, 1 with a
 * message otherwise. Standard API only; built with -fno-builtin. */
#define _GNU_SOURCE
#include <aio.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/wait.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static atomic_int failures;
static atomic_int new_thread_saw_single = -1; /* the flag as the new thread's first read saw it */
static atomic_int new_thread_done;

static void fail(const char *what) {
  fprintf(stderr, "FAIL: %s\n", what);
  atomic_fetch_add(&failures, 1);
}

/* Sizes across the slow paths: medium, packed large (a host's starts),
 * a segment of its own (the segment map, the committed gauge). */
static const size_t sizes[] = {9000, 70000, 200 << 10, 700 << 10, 2 << 20, 3 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* ROUNDS rounds: keep a few blocks alive, filled with TAG, checked before
 * each is freed or grown. */
static void hammer(unsigned tag, int rounds) {
  enum { LIVE = 8 };
  unsigned char *live[LIVE] = {0};
  size_t live_size[LIVE] = {0};
  uint64_t rng = 0x9e3779b97f4a7c15ull * (tag + 1);
  for (int r = 0; r < rounds; r++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    unsigned slot = (unsigned)(rng % LIVE);
    if (live[slot] != NULL) {
      size_t n = live_size[slot];
      unsigned char want = (unsigned char)(tag ^ (n >> 12));
      /* both ends and a middle byte: another thread's block here would
       * carry its own tag */
      if (live[slot][0] != want || live[slot][n / 2] != want || live[slot][n - 1] != want) {
        fail("a block's bytes changed while it was live (two owners of one block?)");
        return;
      }
      if ((rng >> 20) & 1) {
        size_t grown = n + n / 2;
        unsigned char *q = realloc(live[slot], grown);
        if (q == NULL) {
          fail("realloc returned NULL");
          return;
        }
        if (q[0] != want || q[n - 1] != want) {
          fail("realloc lost the block's bytes");
          return;
        }
        free(q);
      } else {
        free(live[slot]);
      }
      live[slot] = NULL;
    }
    size_t n = sizes[(rng >> 8) % NSIZES] + (size_t)((rng >> 32) & 4095);
    unsigned char *p = malloc(n);
    if (p == NULL) {
      fail("malloc returned NULL");
      return;
    }
    /* the bytes checked, not the whole block: the threads' time goes to
     * the slow paths, where a broken lock would let both in */
    p[0] = p[n / 2] = p[n - 1] = (unsigned char)(tag ^ (n >> 12));
    live[slot] = p;
    live_size[slot] = n;
  }
  for (unsigned i = 0; i < LIVE; i++) free(live[i]);
}

static int ROUNDS = 10000; /* $THREAD_ORIGINS_ROUNDS overrides */

static void new_thread_body(void) {
  int seen = __libc_single_threaded; /* first: before this thread allocates anything */
  int expected = -1;
  atomic_compare_exchange_strong(&new_thread_saw_single, &expected, seen);
  hammer(2, ROUNDS);
  atomic_store(&new_thread_done, 1);
}

static void *pthread_body(void *arg) {
  (void)arg;
  new_thread_body();
  return NULL;
}

static int thrd_body(void *arg) {
  (void)arg;
  new_thread_body();
  return 0;
}

static void notify_body(union sigval v) {
  (void)v;
  new_thread_body();
}

/* Run the first thread's share while the new one runs, then wait for it. */
static void race_and_wait(void) {
  hammer(1, ROUNDS);
  /* a notification thread cannot be joined: wait for its flag (ctest's
   * timeout, not a clock here, catches one that never runs) */
  while (!atomic_load(&new_thread_done)) usleep(1000);
  if (atomic_load(&new_thread_saw_single) != 0)
    fail("the new thread's first read found __libc_single_threaded set: the allocator would take its locks "
         "by a plain store with two threads running");
}

static int check_cleared_in_creator(const char *origin) {
  if (__libc_single_threaded) {
    fprintf(stderr, "FAIL: %s: __libc_single_threaded still set after the thread's creation\n", origin);
    return 1;
  }
  return 0;
}

static int child_work(int make_thread) {
  /* A child of fork: one thread, whatever its parent had. */
  hammer(3, ROUNDS / 4);
  if (make_thread) {
    pthread_t t;
    if (pthread_create(&t, NULL, pthread_body, NULL) != 0) return 1;
    if (__libc_single_threaded) return 1;
    race_and_wait();
    pthread_join(t, NULL);
  }
  return atomic_load(&failures) ? 1 : 0;
}

static int wait_child(pid_t pid, const char *what) {
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "FAIL: %s: child status %#x\n", what, status);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s ORIGIN\n", argv[0]);
    return 2;
  }
  const char *origin = argv[1];
  const char *rounds = getenv("THREAD_ORIGINS_ROUNDS");
  if (rounds != NULL && atoi(rounds) > 0) ROUNDS = atoi(rounds);
  void *warm = malloc(300 << 10); /* the allocator is up, its first slow paths taken while single-threaded */
  free(warm);
  int single_at_start = __libc_single_threaded;
  /* The test is void unless the process starts single-threaded (a
   * sanitizer's or valgrind's own threads may clear it first). */
  if (!single_at_start && strcmp(origin, "purge") != 0) {
    printf("%s: the process was multi-threaded from the start; nothing to check\n", origin);
    return 0;
  }
  if (!strcmp(origin, "pthread")) {
    pthread_t t;
    if (pthread_create(&t, NULL, pthread_body, NULL) != 0) return 1;
    if (check_cleared_in_creator(origin)) return 1;
    race_and_wait();
    pthread_join(t, NULL);
  } else if (!strcmp(origin, "thrd")) {
    thrd_t t;
    if (thrd_create(&t, thrd_body, NULL) != thrd_success) return 1;
    if (check_cleared_in_creator(origin)) return 1;
    race_and_wait();
    thrd_join(t, NULL);
  } else if (!strcmp(origin, "timer")) {
    struct sigevent ev = {.sigev_notify = SIGEV_THREAD, .sigev_notify_function = notify_body};
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) return 1;
    struct itimerspec when = {.it_value = {.tv_nsec = 1000000}};
    if (timer_settime(timer, 0, &when, NULL) != 0) return 1;
    race_and_wait();
    timer_delete(timer);
  } else if (!strcmp(origin, "aio")) {
    char path[] = "/tmp/thread_origins_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    unlink(path);
    static char buf[4096];
    struct aiocb cb = {.aio_fildes = fd, .aio_buf = buf, .aio_nbytes = sizeof buf};
    cb.aio_sigevent.sigev_notify = SIGEV_THREAD;
    cb.aio_sigevent.sigev_notify_function = notify_body;
    if (aio_write(&cb) != 0) return 1;
    race_and_wait();
    const struct aiocb *list[1] = {&cb};
    while (aio_error(&cb) == EINPROGRESS) aio_suspend(list, 1, NULL);
    close(fd);
#ifndef THREAD_ORIGINS_STATIC /* a static program cannot dlopen (the linker's warning) */
  } else if (!strcmp(origin, "dlopen")) {
    const char *plugin = getenv("THREAD_ORIGINS_PLUGIN");
    void *h = plugin ? dlopen(plugin, RTLD_NOW) : NULL;
    if (h == NULL) {
      fprintf(stderr, "FAIL: dlopen %s: %s\n", plugin ? plugin : "(THREAD_ORIGINS_PLUGIN unset)", dlerror());
      return 1;
    }
    if (check_cleared_in_creator(origin)) return 1;
    /* the plugin's thread ran its own share in the constructor's thread */
    void (*wait_plugin)(void) = (void (*)(void))dlsym(h, "thread_origins_plugin_wait");
    hammer(1, ROUNDS);
    if (wait_plugin == NULL) return 1;
    wait_plugin();
#endif
  } else if (!strcmp(origin, "purge")) {
    /* TESSERA_PURGE_THREAD=1: started at load or at the first slow path;
     * it takes the heaps' and the large locks against this thread. */
    if (single_at_start) {
      fprintf(stderr, "FAIL: purge: the purge thread did not clear the flag (run with TESSERA_PURGE_THREAD=1)\n");
      return 1;
    }
    hammer(1, ROUNDS);
  } else if (!strcmp(origin, "fork_single") || !strcmp(origin, "fork_threaded")) {
    pthread_t t;
    int threaded = !strcmp(origin, "fork_threaded");
    if (threaded && pthread_create(&t, NULL, pthread_body, NULL) != 0) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) _exit(child_work(1));
    if (threaded) {
      race_and_wait();
      pthread_join(t, NULL);
    }
    if (wait_child(pid, origin)) return 1;
  } else if (!strcmp(origin, "spawn") || !strcmp(origin, "vfork")) {
    /* The child shares the address space while the parent waits: it must
     * not leave the flag cleared in the parent for nothing, nor set. */
    pid_t pid;
    char *args[] = {"true", NULL};
    if (!strcmp(origin, "spawn")) {
      if (posix_spawnp(&pid, "true", NULL, NULL, args, environ) != 0) return 1;
    } else {
      pid = vfork();
      if (pid < 0) return 1;
      if (pid == 0) {
        execvp("true", args);
        _exit(127);
      }
    }
    if (wait_child(pid, origin)) return 1;
    hammer(1, ROUNDS / 4);
    pthread_t t;
    if (pthread_create(&t, NULL, pthread_body, NULL) != 0) return 1;
    race_and_wait();
    pthread_join(t, NULL);
  } else {
    fprintf(stderr, "unknown origin %s\n", origin);
    return 2;
  }
  if (atomic_load(&failures)) return 1;
  printf("%s: flag at start %d, cleared before the new thread ran; both threads' slow paths intact\n", origin,
         single_at_start);
  return 0;
}
