/* locked_ops.c — the workload of tests/lib/locked_ops_budget.sh
 * (lib.locked_ops_budget: locked instructions a large malloc+free cycle).
 *
 *   locked_ops CYCLES [threaded]
 *
 * CYCLES times: a block of 200 KiB (packed in a host: large.c) and one of
 * 2 MiB (a segment of its own, through the segment cache) allocated, their
 * first and last bytes written, and freed: the large lock, the host's
 * starts, the segment map and the committed-bytes gauge each cycle. With
 * `threaded`, a second thread is started first and waits on a pipe for
 * the whole run, so the process is threaded (glibc's
 * __libc_single_threaded false) and the slow paths' locks and
 * read-modify-writes must be atomic. Standard API only; built with
 * -fno-builtin. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int pipe_fds[2];

static void *waiter(void *arg) {
  (void)arg;
  char c;
  while (read(pipe_fds[0], &c, 1) < 0) {
  }
  return NULL;
}

int main(int argc, char **argv) {
  long cycles = argc > 1 ? atol(argv[1]) : 1000;
  int threaded = argc > 2 && !strcmp(argv[2], "threaded");
  if (cycles < 1 || cycles > 10000000) return 2;
  pthread_t t;
  if (threaded && (pipe(pipe_fds) != 0 || pthread_create(&t, NULL, waiter, NULL) != 0)) return 1;
  static const size_t sizes[2] = {200 << 10, 2 << 20};
  unsigned long sum = 0;
  for (long i = 0; i < cycles; i++)
    for (int k = 0; k < 2; k++) {
      unsigned char *p = malloc(sizes[k]);
      if (p == NULL) return 1;
      p[0] = p[sizes[k] - 1] = (unsigned char)i;
      sum += p[0];
      free(p);
    }
  if (threaded) {
    if (write(pipe_fds[1], "x", 1) != 1 || pthread_join(t, NULL) != 0) return 1;
  }
  printf("cycles=%ld threaded=%d check=%lu\n", cycles, threaded, sum);
  return 0;
}
