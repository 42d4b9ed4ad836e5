/* bench_pin_threads: an LD_PRELOAD shim that pins the threads a workload
 * program creates, so a multi-threaded row can be timed in one placement
 * at a time (docs/PERFORMANCE.md, "Twenty-sixth session, pc26"). On 2
 * cores, prodcons/4t's four spinning threads run in whichever placement
 * the kernel chose when they started, and keep it: a pair on one CPU (the
 * producer fills the ring, yields, the consumer drains it) or every pair
 * split across the two (both spin, a switch every few blocks), 10-20x
 * apart in time whatever the allocator.
 *
 *   BENCH_PIN=pair   the i-th created thread on CPU (i / 2) % ncpu
 *                    (prodcons: a producer and its consumer together);
 *   BENCH_PIN=split  the i-th created thread on CPU i % ncpu;
 *   unset            no pinning.
 * Usage: BENCH_PIN=pair LD_PRELOAD="<allocator> build/bench/libbench_pin_threads.so"
 *        build/bench/bench_prodcons --threads 4
 * The allocator is listed first so it still provides malloc. No allocation
 * here: the start records are a static array. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct pinned_start_s {
  void *(*start)(void *);
  void *arg;
  int cpu;
} pinned_start_t;

#define STARTS 4096 /* reused round-robin: a record lives only until its thread starts */
static pinned_start_t starts[STARTS];
static atomic_int created;

static void *pinned_trampoline(void *record) {
  pinned_start_t *s = record;
  void *(*start)(void *) = s->start;
  void *arg = s->arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(s->cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
  return start(arg);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
  static int (*real_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  if (!real_create) real_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(RTLD_NEXT, "pthread_create");
  const char *mode = getenv("BENCH_PIN");
  if (!mode || (strcmp(mode, "pair") && strcmp(mode, "split"))) return real_create(thread, attr, start, arg);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  int i = atomic_fetch_add(&created, 1);
  pinned_start_t *s = &starts[i % STARTS];
  s->start = start;
  s->arg = arg;
  s->cpu = (int)((!strcmp(mode, "pair") ? i / 2 : i) % ncpu);
  return real_create(thread, attr, pinned_trampoline, s);
}
