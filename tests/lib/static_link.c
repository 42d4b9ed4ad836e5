/* static_link.c — libtessera in a statically linked program (lib.static_link):
 * malloc, calloc, realloc and free of the static binary are libtessera's,
 * initialisation works without the dynamic loader, and threads, thread exit
 * and fork behave as in the dynamic build. */
#include "unit_common.h"

#include "tessera.h"

#include <malloc.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *worker(void *arg) {
  void *keep[500];
  for (int r = 0; r < 50; r++) {
    for (int i = 0; i < 500; i++) {
      keep[i] = malloc(16 + (size_t)(i * 7 + r) % 3000);
      memset(keep[i], i & 0xff, 16);
    }
    for (int i = 0; i < 500; i++) free(keep[i]);
  }
  return arg;
}

int main(void) {
  /* glibc's tuning call links too: before, nothing of ours defined mallopt,
   * so the static link pulled glibc's malloc.o and failed on duplicates. */
  CHECK(mallopt(M_ARENA_MAX, 2) == 1, "mallopt(M_ARENA_MAX) is not accepted");
  /* glibc 2.36's results: 1 for every parameter, unknown ones included, but
   * 0 for M_MXFAST beyond 80 * sizeof(size_t) / 4. */
  CHECK(mallopt(12345, 1) == 1, "mallopt of an unknown parameter: not glibc's 1");
  CHECK(mallopt(M_MXFAST, 160) == 1 && mallopt(M_MXFAST, 161) == 0 && mallopt(M_MXFAST, -1) == 0,
        "mallopt(M_MXFAST) range not glibc's");
  void *p = malloc(100);
  CHECK(tes_usable_size(p) >= 100, "malloc of the static binary is not libtessera's");
  char *z = calloc(1000, 3);
  size_t nonzero = 0;
  for (int i = 0; i < 3000; i++) nonzero += z[i] != 0;
  CHECK(nonzero == 0, "calloc not zeroed");
  z = realloc(z, 300000);
  CHECK(z != NULL && tes_usable_size(z) >= 300000, "realloc to a large block");
  free(z);
  free(p);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) REQUIRE(pthread_create(&t[i], NULL, worker, NULL) == 0, "pthread_create");
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  tes_stats_t s;
  tes_stats_get(&s);
  CHECK(s.threads_exited >= 4, "thread exits seen: %lu", (unsigned long)s.threads_exited);
  pid_t pid = fork();
  if (pid == 0) {
    void *c = malloc(5000);
    _exit(c != NULL && tes_usable_size(c) >= 5000 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
  return unit_finish("static_link");
}
