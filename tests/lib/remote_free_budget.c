/* remote_free_budget.c — a workload whose frees are nearly all frees of
 * another thread's blocks, for tests/lib/slowpath_budget.sh (measuring
 * tes_free_slow, where such a free goes when the slice table misses).
 *
 *   remote_free_budget [ROUNDS]
 *
 * The shape of the suite's prodcons row: the main thread allocates a batch
 * of 2,048 blocks of 16-1024 B (one in 16 a medium one, 9-16 KiB), each
 * written, then a second thread checks and frees them all; ROUNDS times,
 * the two taking turns through a barrier. The freeing thread's first free
 * gives it a heap (a few thousand instructions, once). A fixed xorshift
 * sequence: the same calls every run. Standard API only; built with
 * -fno-builtin. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BATCH 2048

static char *block[BATCH];
static pthread_barrier_t turn;
static long rounds = 50;
static int failed;

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static void *freer(void *arg) {
  (void)arg;
  for (long r = 0; r < rounds; r++) {
    pthread_barrier_wait(&turn); /* the batch is allocated */
    for (unsigned i = 0; i < BATCH; i++) {
      if (block[i][0] != (char)i) failed = 1;
      free(block[i]);
    }
    pthread_barrier_wait(&turn); /* freed */
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) rounds = strtol(argv[1], NULL, 10);
  if (rounds <= 0) {
    fprintf(stderr, "usage: %s [ROUNDS]\n", argv[0]);
    return 2;
  }
  pthread_barrier_init(&turn, NULL, 2);
  pthread_t t;
  if (pthread_create(&t, NULL, freer, NULL) != 0) {
    fprintf(stderr, "%s: pthread_create failed\n", argv[0]);
    return 1;
  }
  uint64_t x = 88172645463325252u;
  for (long r = 0; r < rounds; r++) {
    for (unsigned i = 0; i < BATCH; i++) {
      size_t size = i % 16 == 15 ? 9216 + (size_t)(xorshift(&x) % 7169) : 16 + (size_t)(xorshift(&x) % 1009);
      block[i] = malloc(size);
      if (block[i] == NULL) {
        fprintf(stderr, "%s: malloc(%zu) failed\n", argv[0], size);
        return 1;
      }
      block[i][0] = (char)i; /* touched, as a program would */
    }
    pthread_barrier_wait(&turn);
    pthread_barrier_wait(&turn);
  }
  pthread_join(t, NULL);
  if (failed) {
    fprintf(stderr, "%s: a block was overwritten\n", argv[0]);
    return 1;
  }
  return 0;
}
