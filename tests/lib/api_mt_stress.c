/* api_mt_stress.c — many threads passing blocks to each other.
 *
 * Each round starts T worker threads connected in a ring of bounded queues.
 * A worker allocates blocks of random sizes (8 B .. 64 KiB, a few larger),
 * fills each with a pattern derived from its address and size, and pushes it
 * to the next worker's queue; it pops blocks from its own queue, verifies
 * the pattern, and frees them (a cross-thread free, since another thread
 * allocated them) or reallocs and forwards them. At the end of a round the
 * threads exit with blocks still in flight, which the main thread verifies
 * and frees (blocks owned by exited threads), then new threads start. A
 * corrupted, lost or doubly handed-out block shows up as a pattern mismatch.
 *
 * Standard names only: runs linked with libtessera.a, under LD_PRELOAD, and
 * against glibc. Exit status: number of failed checks (0 = pass). */
#define _GNU_SOURCE
#include "api_check.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>

enum { QUEUE_CAPACITY = 256, MAX_THREADS = 8 };

typedef struct block_s {
  unsigned char *data;
  size_t size;
} block_t;

typedef struct queue_s {
  pthread_mutex_t lock;
  block_t slots[QUEUE_CAPACITY];
  int head, count;
} queue_t;

static queue_t queues[MAX_THREADS];
static atomic_long corrupted_blocks, blocks_moved, misaligned_blocks;
static int thread_count = 4;
static long ops_per_thread = 40000;
/* How many blocks a round hands over depends on the scheduler: on a loaded
 * 2-core machine a worker may run its ops while its neighbours are not
 * scheduled, and a round once moved under 1,000 blocks (the check below).
 * So the workers of a round go on past their ops until the round has moved
 * MIN_MOVED blocks, for ROUND_SECONDS at most: the check then fails only
 * when hand-off really was not exercised. */
enum { MIN_MOVED = 2000 };
#define ROUND_SECONDS 20.0
static atomic_long round_moved;
static double round_deadline;

/* Check the pattern on the first and last 64 bytes and every 4 KiB: enough
 * to catch reuse of a live block while keeping the test fast. */
static bool block_intact(const block_t *b) {
  for (size_t i = 0; i < b->size; i = (i < 64 || i + 64 >= b->size) ? i + 1 : i + 4096)
    if (b->data[i] != api_pattern_byte(b->data, b->size, i)) return false;
  return true;
}

static void block_fill(block_t *b) {
  for (size_t i = 0; i < b->size; i = (i < 64 || i + 64 >= b->size) ? i + 1 : i + 4096)
    b->data[i] = api_pattern_byte(b->data, b->size, i);
}

static bool queue_push(queue_t *q, block_t b) {
  pthread_mutex_lock(&q->lock);
  bool ok = q->count < QUEUE_CAPACITY;
  if (ok) {
    q->slots[(q->head + q->count) % QUEUE_CAPACITY] = b;
    q->count++;
  }
  pthread_mutex_unlock(&q->lock);
  return ok;
}

static bool queue_pop(queue_t *q, block_t *out) {
  pthread_mutex_lock(&q->lock);
  bool ok = q->count > 0;
  if (ok) {
    *out = q->slots[q->head];
    q->head = (q->head + 1) % QUEUE_CAPACITY;
    q->count--;
  }
  pthread_mutex_unlock(&q->lock);
  return ok;
}

static size_t random_size(uint64_t *state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  uint32_t r = (uint32_t)(*state >> 33);
  if (r % 1000 == 0) return 256 * 1024 + r % (2 * 1024 * 1024);  /* large */
  if (r % 16 == 0) return 1024 + r % 65536;                       /* medium */
  return 1 + r % 512;                                             /* small */
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  queue_t *mine = &queues[id], *next = &queues[(id + 1) % thread_count];
  uint64_t rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)id * 7919;
  /* A few blocks kept locally for a while, freed by this thread. */
  block_t local[32] = {{0}};
  for (long op = 0; op < ops_per_thread ||
                     (atomic_load(&round_moved) < MIN_MOVED && api_now_seconds() < round_deadline);
       op++) {
    block_t b;
    b.size = random_size(&rng);
    b.data = malloc(b.size);
    if (!b.data) {
      atomic_fetch_add(&corrupted_blocks, 1);
      continue;
    }
    if ((uintptr_t)b.data & 15) atomic_fetch_add(&misaligned_blocks, 1);
    block_fill(&b);
    int slot = (int)(rng >> 40) % 32;
    if (op % 3 == 0) {
      if (local[slot].data) {
        if (!block_intact(&local[slot])) atomic_fetch_add(&corrupted_blocks, 1);
        free(local[slot].data);
      }
      local[slot] = b;
    } else if (!queue_push(next, b)) {
      free(b.data);
    }
    block_t in;
    if (queue_pop(mine, &in)) {
      if (!block_intact(&in)) atomic_fetch_add(&corrupted_blocks, 1);
      atomic_fetch_add(&blocks_moved, 1);
      atomic_fetch_add(&round_moved, 1);
      if (op % 5 == 0) {
        /* realloc a foreign block and pass it on. */
        /* realloc a foreign block: the first bytes must survive the move
         * (checked against the pattern of the old address and size). */
        const unsigned char *old_data = in.data;
        size_t old_size = in.size;
        in.size = in.size / 2 + 1 + (rng >> 50) % 300;
        unsigned char *moved = realloc(in.data, in.size);
        if (!moved) {
          atomic_fetch_add(&corrupted_blocks, 1);
          continue;
        }
        size_t kept = in.size < old_size ? in.size : old_size;
        for (size_t i = 0; i < kept && i < 64; i++)
          if (moved[i] != api_pattern_byte(old_data, old_size, i)) {
            atomic_fetch_add(&corrupted_blocks, 1);
            break;
          }
        in.data = moved;
        block_fill(&in);
        if (!queue_push(next, in)) free(in.data);
      } else {
        free(in.data);
      }
    }
  }
  for (int i = 0; i < 32; i++)
    if (local[i].data) {
      if (!block_intact(&local[i])) atomic_fetch_add(&corrupted_blocks, 1);
      free(local[i].data);
    }
  /* Blocks still in the queues are left for the main thread: their owner
   * may be gone by the time they are freed. */
  return NULL;
}

int main(int argc, char **argv) {
  api_require_tessera_if_asked(argc, argv);
  int rounds = 8;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) thread_count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops_per_thread = atol(argv[++i]);
  }
  if (thread_count < 2) thread_count = 2;
  if (thread_count > MAX_THREADS) thread_count = MAX_THREADS;
  for (int q = 0; q < MAX_THREADS; q++) pthread_mutex_init(&queues[q].lock, NULL);

  API_GROUP("multi-threaded block passing");
  long leftovers = 0;
  for (int round = 0; round < rounds; round++) {
    /* Vary the thread count per round so heaps are torn down and new ones
     * adopt abandoned memory. */
    int saved = thread_count;
    thread_count = 2 + (round % (saved - 1));
    pthread_t threads[MAX_THREADS];
    atomic_store(&round_moved, 0);
    round_deadline = api_now_seconds() + ROUND_SECONDS;
    for (int t = 0; t < thread_count; t++)
      REQUIRE(pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)t) == 0,
              "pthread_create failed in round %d", round);
    for (int t = 0; t < thread_count; t++) pthread_join(threads[t], NULL);
    /* Drain: verify and free blocks whose allocating thread has exited. */
    for (int q = 0; q < thread_count; q++) {
      block_t b;
      while (queue_pop(&queues[q], &b)) {
        if (!block_intact(&b)) atomic_fetch_add(&corrupted_blocks, 1);
        free(b.data);
        leftovers++;
      }
    }
    thread_count = saved;
  }
  long corrupted = atomic_load(&corrupted_blocks);
  long moved = atomic_load(&blocks_moved);
  CHECK(corrupted == 0, "%ld blocks corrupted or failed to allocate", corrupted);
  CHECK(atomic_load(&misaligned_blocks) == 0, "%ld blocks not 16-aligned",
        (long)atomic_load(&misaligned_blocks));
  CHECK(moved > rounds * 1000L, "only %ld blocks crossed threads: the test did not exercise hand-off", moved);
  CHECK(leftovers > 0, "no block outlived its thread: the abandoned-owner case was not exercised");
  printf("rounds=%d blocks_moved=%ld freed_after_owner_exit=%ld\n", rounds, moved, leftovers);
  return api_finish("api_mt_stress");
}
