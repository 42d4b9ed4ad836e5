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
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* Mode "hold": one batch at a time. The freer frees every block of a batch
 * but its first, says so, and holds that one (its page went full early,
 * so it is not the class head); the owner then runs slow calls
 * for 3 ms (three sweeps or more), so the pages whose other blocks came
 * back go through the delayed list to their queue and are swept while one
 * block is still live, and allocates the next batch; only then does the
 * freer check the held block and free it. A page retired with that block
 * live is handed out again in the next batch and the check fails. */
static _Atomic unsigned hold_freed; /* rounds whose batch is back but its first block */
static uint64_t *held;
static uint64_t held_tag;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void *hold_freer(void *arg) {
  (void)arg;
  for (unsigned round = 0;; round++) {
    while (!atomic_load_explicit(&slot_full[0], memory_order_acquire))
      if (atomic_load_explicit(&done, memory_order_acquire)) goto out;
    if (held != NULL) {
      for (unsigned w = 0; w < SIZE / 8; w++)
        if (held[w] != ((uintptr_t)held ^ w ^ held_tag)) atomic_fetch_add(&bad, 1);
      tes_free(held);
    }
    uint64_t tag = slot_tag[0];
    for (unsigned i = 1; i < BATCH; i++) {
      uint64_t *b = slots[0][i];
      for (unsigned w = 0; w < SIZE / 8; w++)
        if (b[w] != ((uintptr_t)b ^ w ^ tag)) atomic_fetch_add(&bad, 1);
      tes_free(b);
    }
    held = slots[0][0]; /* the first: its page went full, not the class head */
    held_tag = tag;
    atomic_store_explicit(&slot_full[0], 0, memory_order_release);
    atomic_store_explicit(&hold_freed, round + 1, memory_order_release);
  }
out:
  if (held != NULL) {
    for (unsigned w = 0; w < SIZE / 8; w++)
      if (held[w] != ((uintptr_t)held ^ w ^ held_tag)) atomic_fetch_add(&bad, 1);
    tes_free(held);
  }
  return NULL;
}

static void hold_owner(unsigned rounds) {
  void *other[64];
  for (unsigned r = 0; r < rounds; r++) {
    for (unsigned i = 0; i < BATCH; i++) {
      uint64_t *b = tes_malloc(SIZE);
      if (b == NULL) exit(2);
      for (unsigned w = 0; w < SIZE / 8; w++) b[w] = (uintptr_t)b ^ w ^ ((uint64_t)r << 32);
      slots[0][i] = b;
    }
    slot_tag[0] = (uint64_t)r << 32;
    atomic_store_explicit(&slot_full[0], 1, memory_order_release);
    while (atomic_load_explicit(&hold_freed, memory_order_acquire) != r + 1) {
    }
    for (double until = now_ms() + 3; now_ms() < until;) {
      for (unsigned i = 0; i < 64; i++) other[i] = tes_malloc(48 + (i % 4) * 1024);
      for (unsigned i = 0; i < 64; i++) tes_free(other[i]);
    }
  }
}

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 4000;
  bool hold = argc > 2 && strcmp(argv[2], "hold") == 0;
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, 0);
  tes_stats_t before, after;
  pthread_t t;
  if (pthread_create(&t, NULL, hold ? hold_freer : freer, NULL) != 0) return 2;
  tes_stats_get(&before); /* after pthread_create, whose thread data (kept for reuse) may share the class */
  void *other[64];
  if (hold) hold_owner(rounds);
  for (unsigned r = 0; r < rounds && !hold; r++) {
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
