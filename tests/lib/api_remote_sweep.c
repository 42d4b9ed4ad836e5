/* api_remote_sweep.c — queued pages emptied by other threads retire once
 * per purge delay (src/heap.c, queues_sweep) while those threads are still
 * freeing into them: no block may be retired while it is live.
 *
 * The owner allocates batches of 256-byte blocks, fills each with a
 * pattern of its own and hands the batch to a freeing thread, which checks
 * the pattern and frees the blocks; meanwhile the owner's slow path runs
 * (batches of 48-byte blocks) with a purge delay of 0, so the sweep runs
 * every millisecond, with frees landing as it looks. A page retired with a
 * block still to come would hand that block out again: its pattern is
 * overwritten (reported), or the free reports it. At the end the class
 * of the handed-over blocks has as many live blocks as at the start.
 * Exit 0 and "remote sweep ok". Runs in both builds and under TSan
 * (sanitize.lib_remote_sweep). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera.h>

#define BATCH 512
#define SLOTS 8
#define SIZE 256

static uint64_t *slots[SLOTS][BATCH];
static uint64_t slot_tag[SLOTS]; /* the round: a block handed out again gets another pattern */
static _Atomic int slot_full[SLOTS];
static _Atomic int done, bad;

static void *freer(void *arg) {
  (void)arg;
  for (unsigned next = 0;; next = (next + 1) % SLOTS) {
    while (!atomic_load_explicit(&slot_full[next], memory_order_acquire)) {
      if (atomic_load_explicit(&done, memory_order_acquire) &&
          !atomic_load_explicit(&slot_full[next], memory_order_acquire))
        return NULL;
    }
    uint64_t tag = slot_tag[next];
    for (unsigned i = 0; i < BATCH; i++) {
      uint64_t *b = slots[next][i];
      /* Half-way, a pause: the owner's sweep then finds pages with some of
       * their blocks still to come. */
      if (i == BATCH / 2)
        for (volatile unsigned spin = 0; spin < 2000; spin++) {
        }
      for (unsigned w = 0; w < SIZE / 8; w++)
        if (b[w] != ((uintptr_t)b ^ w ^ tag)) atomic_fetch_add(&bad, 1);
      tes_free(b);
    }
    atomic_store_explicit(&slot_full[next], 0, memory_order_release);
  }
}

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 4000;
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 0);
  tes_stats_t before, after;
  pthread_t t;
  if (pthread_create(&t, NULL, freer, NULL) != 0) return 2;
  tes_stats_get(&before); /* after pthread_create, whose thread data (kept for reuse) may share the class */
  void *other[64];
  for (unsigned r = 0; r < rounds; r++) {
    unsigned s = r % SLOTS;
    while (atomic_load_explicit(&slot_full[s], memory_order_acquire)) {
    }
    for (unsigned i = 0; i < BATCH; i++) {
      uint64_t *b = tes_malloc(SIZE);
      if (b == NULL) return 2;
      for (unsigned w = 0; w < SIZE / 8; w++) b[w] = (uintptr_t)b ^ w ^ ((uint64_t)r << 32);
      slots[s][i] = b;
    }
    slot_tag[s] = (uint64_t)r << 32;
    atomic_store_explicit(&slot_full[s], 1, memory_order_release);
    /* Slow calls of another class: the sweep's turn comes with them. */
    for (unsigned i = 0; i < 64; i++) other[i] = tes_malloc(48 + (r % 4) * 1024);
    for (unsigned i = 0; i < 64; i++) tes_free(other[i]);
  }
  atomic_store_explicit(&done, 1, memory_order_release);
  pthread_join(t, NULL);
  tes_collect(true);
  tes_stats_get(&after);
  /* The class of the handed-over blocks: the one with rounds * BATCH more
   * mallocs (its block size differs between the builds). */
  int64_t live_before = -1, live_after = -1;
  for (uint32_t c = 0; c < after.class_count; c++)
    if (after.class_malloc_calls[c] - before.class_malloc_calls[c] >= (uint64_t)rounds * BATCH) {
      live_before = before.class_live_blocks[c];
      live_after = after.class_live_blocks[c];
    }
  if (atomic_load(&bad) != 0) {
    fprintf(stderr, "api_remote_sweep: %d words overwritten in live blocks\n", atomic_load(&bad));
    return 1;
  }
  if (live_before < 0 || live_after != live_before) {
    fprintf(stderr, "api_remote_sweep: live blocks of the handed-over class %lld -> %lld\n", (long long)live_before,
            (long long)live_after);
    return 1;
  }
  printf("remote sweep ok\n");
  return 0;
}
