/* Workloads `cache-scratch` and `cache-thrash`: false-sharing probes after
 * the Hoard benchmarks of the same names. Each thread repeatedly allocates an
 * 8-byte object, writes it many times, and frees it.
 *   --mode thrash  each thread allocates its own objects: an allocator that
 *                  hands neighbouring small blocks to different threads makes
 *                  them fight over one cache line (active false sharing);
 *   --mode scratch the main thread first allocates one small object per
 *                  thread (adjacent in memory) and each thread starts by
 *                  freeing the one it was given: an allocator that reuses a
 *                  freed block for the freeing thread re-creates the shared
 *                  line (passive false sharing).
 * The writes dominate the time, so a slow run here means shared lines, not a
 * slow malloc. */
#include "wl_common.h"

#include <pthread.h>

typedef struct probe_s {
  char *given;     /* scratch mode: object to free first */
  long iterations;
  long writes;
} probe_t;

static void *prober(void *arg) {
  probe_t *p = arg;
  if (p->given) free(p->given);
  for (long i = 0; i < p->iterations; i++) {
    volatile char *obj = wl_check(malloc(8), "malloc returned NULL");
    for (long w = 0; w < p->writes; w++) {
      obj[0] = (char)(obj[0] + 1);
      obj[7] = (char)(obj[7] + 1);
    }
    free((void *)obj);
  }
  return NULL;
}

int main(int argc, char **argv) {
  static const char *const modes[] = {"scratch", "thrash", NULL};
  wl_options_t o = wl_parse_ex(argc, argv,
                               "cache-scratch/-thrash: false-sharing probes with 8-byte objects (--mode scratch|thrash)",
                               modes, 0);
  int scratch;
  if (o.mode == NULL || !strcmp(o.mode, "thrash")) scratch = 0;
  else if (!strcmp(o.mode, "scratch")) scratch = 1;
  else { fprintf(stderr, "cache: --mode must be scratch or thrash, not '%s'\n", o.mode); return 2; }

  const long writes = 1000;
  long iterations = wl_scaled(&o, 200000L, 10) / o.threads;
  if (iterations < 1) iterations = 1;
  pthread_t tid[1024];
  probe_t probe[1024];
  for (int t = 0; t < o.threads; t++) {
    probe[t].given = scratch ? wl_check(malloc(8), "malloc returned NULL") : NULL;
    probe[t].iterations = iterations;
    probe[t].writes = writes;
  }
  double t0 = wl_now();
  for (int t = 0; t < o.threads; t++)
    if (pthread_create(&tid[t], NULL, prober, &probe[t])) wl_fail("pthread_create failed");
  for (int t = 0; t < o.threads; t++) pthread_join(tid[t], NULL);
  wl_report(wl_now() - t0, (double)iterations * o.threads * writes);
  return 0;
}
