/* soak_prodcons.c — producer/consumer: every block is freed by a thread
 * other than the one that allocated it.
 *
 *   soak_prodcons [BLOCKS [PAIRS]]     (default 1000000 2)
 *
 * PAIRS producers allocate BLOCKS blocks in total (8 B to 2 KiB, some to
 * 64 KiB), write a sequence number and a pattern into each and pass them in
 * batches of 64 through a bounded queue to PAIRS consumers, which verify
 * every block and free it (a cross-thread free), and free the batch array
 * too (also allocated by the producer). Asserted: every block arrives exactly
 * once (the sum and count of sequence numbers match) with its contents, and
 * when all is freed the allocator's live bytes are back where they started
 * (nothing stranded in hand-off lists). */
#define _GNU_SOURCE
#include "soak_common.h"

#include <pthread.h>
#include <stdatomic.h>

enum { BATCH = 64, QUEUE_CAP = 256, MAX_PAIRS = 8 };

typedef struct batch_s {
  unsigned char *block[BATCH];
  uint32_t size[BATCH];
  int count;
} batch_t;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t not_empty, not_full;
  batch_t *items[QUEUE_CAP];
  size_t head, count;
  int producers_left;
} queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
           {0}, 0, 0, 0};

static uint64_t blocks_total;
static atomic_uint_fast64_t next_seq, consumed_count, consumed_sum;

static void queue_push(batch_t *b) {
  pthread_mutex_lock(&queue.lock);
  while (queue.count == QUEUE_CAP) pthread_cond_wait(&queue.not_full, &queue.lock);
  queue.items[(queue.head + queue.count++) % QUEUE_CAP] = b;
  pthread_cond_signal(&queue.not_empty);
  pthread_mutex_unlock(&queue.lock);
}

/* NULL when every producer is done and the queue is empty. */
static batch_t *queue_pop(void) {
  pthread_mutex_lock(&queue.lock);
  while (queue.count == 0 && queue.producers_left > 0)
    pthread_cond_wait(&queue.not_empty, &queue.lock);
  batch_t *b = NULL;
  if (queue.count > 0) {
    b = queue.items[queue.head];
    queue.head = (queue.head + 1) % QUEUE_CAP;
    queue.count--;
    pthread_cond_signal(&queue.not_full);
  }
  pthread_mutex_unlock(&queue.lock);
  return b;
}

static void *producer(void *arg) {
  uint64_t rng = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
  for (;;) {
    batch_t *b = soak_malloc(sizeof *b);
    SOAK_CHECK(b != NULL);
    b->count = 0;
    for (int i = 0; i < BATCH; i++) {
      uint64_t seq = atomic_fetch_add(&next_seq, 1);
      if (seq >= blocks_total) break;
      uint64_t r = soak_rng(&rng);
      uint32_t size = (r & 31) == 0 ? 2048 + (uint32_t)(r % 63000) : 8 + (uint32_t)(r % 2040);
      unsigned char *p = soak_malloc(size);
      SOAK_CHECK(p != NULL);
      soak_fill(p, size, seq);
      if (size >= 8) memcpy(p, &seq, sizeof seq);
      b->block[b->count] = p;
      b->size[b->count++] = size;
    }
    if (b->count == 0) {
      soak_free(b);
      break;
    }
    queue_push(b);
  }
  pthread_mutex_lock(&queue.lock);
  queue.producers_left--;
  pthread_cond_broadcast(&queue.not_empty);
  pthread_mutex_unlock(&queue.lock);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  batch_t *b;
  while ((b = queue_pop()) != NULL) {
    for (int i = 0; i < b->count; i++) {
      uint64_t seq;
      memcpy(&seq, b->block[i], sizeof seq);
      SOAK_CHECK(seq < blocks_total);
      unsigned char expect[8];
      memcpy(expect, &seq, sizeof seq);
      /* bytes 0-7 hold seq, the rest the pattern seeded by it */
      SOAK_CHECK(memcmp(b->block[i], expect, 8) == 0);
      for (size_t j = 8; j < b->size[i]; j++)
        SOAK_CHECK(b->block[i][j] == soak_byte(seq, j));
      soak_free(b->block[i]);
      atomic_fetch_add(&consumed_count, 1);
      atomic_fetch_add(&consumed_sum, seq);
    }
    soak_free(b);
  }
  return NULL;
}

int main(int argc, char **argv) {
  blocks_total = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
  long pairs = argc > 2 ? atol(argv[2]) : 2;
  if (blocks_total == 0 || pairs < 1 || pairs > MAX_PAIRS) {
    fprintf(stderr, "usage: %s [BLOCKS [PAIRS<=%d]]\n", argv[0], MAX_PAIRS);
    return 2;
  }
  soak_require_tessera();
  /* The main thread gets a heap of its own before it collects: a thread
   * that never allocated cannot collect abandoned pages (a separate bug,
   * tested by soak_collect_fresh.c), and this test is about hand-off. */
  soak_free(soak_malloc(1));
  tes_collect(true);
  tes_stats_t before, after;
  tes_stats_get(&before);
  queue.producers_left = (int)pairs;
  pthread_t prod[MAX_PAIRS], cons[MAX_PAIRS];
  for (long i = 0; i < pairs; i++) {
    SOAK_CHECK(pthread_create(&prod[i], NULL, producer, (void *)(uintptr_t)(i + 1)) == 0);
    SOAK_CHECK(pthread_create(&cons[i], NULL, consumer, NULL) == 0);
  }
  for (long i = 0; i < pairs; i++) {
    SOAK_CHECK(pthread_join(prod[i], NULL) == 0);
    SOAK_CHECK(pthread_join(cons[i], NULL) == 0);
  }
  uint64_t count = atomic_load(&consumed_count), sum = atomic_load(&consumed_sum);
  uint64_t want_sum = blocks_total * (blocks_total - 1) / 2;
  tes_collect(true);
  tes_stats_get(&after);
  printf("soak_prodcons: %llu blocks allocated by %ld producers and freed by %ld consumers "
         "(cross-thread frees counted by the allocator: %llu); live bytes before %lld, after %lld\n",
         (unsigned long long)count, pairs, pairs,
         (unsigned long long)(after.cross_thread_frees - before.cross_thread_frees),
         (long long)before.in_use.current, (long long)after.in_use.current);
  fflush(stdout);
  SOAK_CHECK(count == blocks_total);
  SOAK_CHECK(sum == want_sum);
  /* Nothing stranded: every cross-thread free is accounted for. */
  SOAK_CHECK(after.in_use.current <= before.in_use.current + 64 * 1024);
  return 0;
}
