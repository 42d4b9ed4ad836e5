/* Workload `larson`: a larson-style server simulation (after Larson and
 * Krishnan's benchmark). Each of N threads owns 1,000 slots of live blocks
 * (16-512 B) and repeatedly frees a random slot and allocates a new block in
 * its place. After every round of replacements a thread exits and a fresh
 * thread inherits its slots, so blocks allocated by one thread are freed by
 * its successor and thread start/exit is part of the load (PITFALLS #3, #4). */
#include "wl_common.h"

#include <pthread.h>

#define SLOTS 1000

typedef struct lane_s {
  unsigned char *slot[SLOTS];
  long steps;     /* replacements per round */
  uint64_t rng;
} lane_t;

static void *round_worker(void *arg) {
  lane_t *l = arg;
  for (long s = 0; s < l->steps; s++) {
    size_t i = (size_t)(wl_rand(&l->rng) % SLOTS);
    if (l->slot[i]) {
      if (l->slot[i][0] != (unsigned char)i) wl_fail("block contents overwritten");
      free(l->slot[i]);
    }
    l->slot[i] = wl_check(malloc(wl_rand_range(&l->rng, 16, 512)), "malloc returned NULL");
    l->slot[i][0] = (unsigned char)i;
  }
  return NULL;
}

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "larson: server simulation, threads replace random blocks and hand them to successors");
  long total = wl_scaled(&o, 12000000L, 10000);
  const int rounds = 30;
  lane_t *lane = wl_check(calloc((size_t)o.threads, sizeof(lane_t)), "calloc returned NULL");
  pthread_t tid[1024];
  for (int t = 0; t < o.threads; t++) {
    lane[t].rng = o.seed + (uint64_t)t * 31337;
    lane[t].steps = total / o.threads / rounds;
  }
  double t0 = wl_now();
  for (int r = 0; r < rounds; r++) {
    for (int t = 0; t < o.threads; t++)
      if (pthread_create(&tid[t], NULL, round_worker, &lane[t])) wl_fail("pthread_create failed");
    for (int t = 0; t < o.threads; t++) pthread_join(tid[t], NULL);
  }
  double work = wl_now() - t0;
  double ops = (double)lane[0].steps * rounds * o.threads;
  for (int t = 0; t < o.threads; t++)
    for (int i = 0; i < SLOTS; i++) free(lane[t].slot[i]);
  free(lane);
  wl_report(work, ops);
  return 0;
}
