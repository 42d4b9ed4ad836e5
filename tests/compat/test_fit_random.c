/* test_fit_random.c — random malloc/free sequences on every variant, with
 * every block filled with a pattern derived from its address and checked
 * before it is freed, the heap checker run every 64 operations, and the
 * policy checked on every malloc: before each call the free blocks are read
 * from the arena's index; the block handed out must come from the
 * lowest-address fitting free block (first fit) or from a free block of the
 * smallest fitting size (best fit). If nothing fits, the heap must grow.
 * Sizes mix small, medium and (rarely) large requests so that the exact-size
 * bins and the size tree of the fast best fit are both used.
 * A second case interleaves all four variants in one thread, so their runs
 * alternate along the break and each arena keeps many runs of which only
 * the newest may grow.
 */
#include "fit_test.h"

#include <stdint.h>

#define SLOTS 300
#define OPS 12000
#define MAX_FREE_SEEN 4096

typedef struct {
  fit_block_t *start;
  size_t size;
} free_seen_t;

static free_seen_t seen[MAX_FREE_SEEN];
static size_t seen_count;

static void remember(fit_block_t *b, void *ctx) {
  (void)ctx;
  if (seen_count < MAX_FREE_SEEN) seen[seen_count++] = (free_seen_t){b, fit_size(b)};
}

static unsigned char pattern(const void *p, size_t i) {
  uintptr_t v = (uintptr_t)p;
  return (unsigned char)((v >> 4) * 31 + i * 7 + 1);
}

static size_t random_size(unsigned *seed) {
  unsigned r = (unsigned)rand_r(seed);
  switch (r % 10) {
  case 0: return r % 16;                          /* tiny, including 0 */
  case 9: return 120000 + (r >> 8) % 200000;      /* above the exact-size bins */
  case 8: return 2000 + (r >> 8) % 30000;
  default: return 16 + (r >> 8) % 600;
  }
}

/* Which free block (from the snapshot) contains h? */
static const free_seen_t *containing(const fit_block_t *h) {
  for (size_t i = 0; i < seen_count; i++)
    if ((const char *)h >= (const char *)seen[i].start && (const char *)h < (const char *)seen[i].start + seen[i].size)
      return &seen[i];
  return NULL;
}

static void check_choice(const fit_test_api_t *api, size_t need, const void *p, unsigned long seg_before) {
  const fit_block_t *h = fit_header_of((void *)p);
  const free_seen_t *want = NULL;
  for (size_t i = 0; i < seen_count; i++) {
    if (seen[i].size < need) continue;
    if (!want) {
      want = &seen[i];
    } else if (api->best_fit ? seen[i].size < want->size : seen[i].start < want->start) {
      want = &seen[i];
    }
  }
  if (!want) {
    CHECK(get_data_segment_size() > seg_before); /* nothing fitted: must grow */
    return;
  }
  const free_seen_t *got = containing(h);
  CHECK(got != NULL);
  if (api->best_fit)
    CHECK(got->size == want->size);
  else
    CHECK(got->start == want->start);
  CHECK(get_data_segment_size() == seg_before);
}

static void case_random(const fit_test_api_t *api) {
  static char *slot[SLOTS];
  static size_t slot_size[SLOTS];
  unsigned seed = 12345;
  fit_arena_t *arena = NULL;
  for (int op = 0; op < OPS; op++) {
    int i = rand_r(&seed) % SLOTS;
    if (slot[i]) {
      for (size_t k = 0; k < slot_size[i]; k++) CHECK((unsigned char)slot[i][k] == pattern(slot[i], k));
      api->release(slot[i]);
      slot[i] = NULL;
    } else {
      size_t n = random_size(&seed);
      seen_count = 0;
      if (arena) fit_index_each(arena, remember, NULL);
      unsigned long seg = get_data_segment_size();
      char *p = api->alloc(n);
      CHECK(p != NULL && (uintptr_t)p % 16 == 0);
      if (!arena) arena = fit_test_arena_of(p);
      CHECK(fit_test_arena_of(p) == arena);
      if (seen_count < MAX_FREE_SEEN) check_choice(api, fit_test_block_size(n), p, seg);
      CHECK(fit_size(fit_header_of(p)) >= fit_test_block_size(n));
      for (size_t k = 0; k < n; k++) p[k] = (char)pattern(p, k);
      slot[i] = p;
      slot_size[i] = n;
    }
    if (op % 64 == 0) CHECK_HEAP();
  }
  for (int i = 0; i < SLOTS; i++) {
    if (!slot[i]) continue;
    for (size_t k = 0; k < slot_size[i]; k++) CHECK((unsigned char)slot[i][k] == pattern(slot[i], k));
    api->release(slot[i]);
  }
  CHECK_HEAP();
  /* Everything is free again: all of it is in free blocks except the run
   * records and alignment padding (at most 32 bytes per run). */
  unsigned long runs = 0;
  for (fit_run_t *r = arena->runs; r; r = r->next) runs++;
  unsigned long fr = atomic_load(&arena->free_bytes), seg = get_data_segment_size();
  CHECK(fr <= seg && seg - fr <= runs * 32);
}

static void case_interleaved(const fit_test_api_t *unused) {
  (void)unused;
  enum { PER_API = 200 };
  static char *slot[FIT_TEST_API_COUNT][PER_API];
  static size_t slot_size[FIT_TEST_API_COUNT][PER_API];
  unsigned seed = 777;
  for (int op = 0; op < 40000; op++) {
    size_t w = (size_t)rand_r(&seed) % FIT_TEST_API_COUNT;
    int i = rand_r(&seed) % PER_API;
    const fit_test_api_t *api = &fit_test_apis[w];
    if (slot[w][i]) {
      for (size_t k = 0; k < slot_size[w][i]; k++) CHECK((unsigned char)slot[w][i][k] == pattern(slot[w][i], k));
      api->release(slot[w][i]);
      slot[w][i] = NULL;
    } else {
      size_t n = (size_t)rand_r(&seed) % 3000;
      char *p = api->alloc(n);
      CHECK(p != NULL);
      for (size_t k = 0; k < n; k++) p[k] = (char)pattern(p, k);
      slot[w][i] = p;
      slot_size[w][i] = n;
    }
    if (op % 256 == 0) CHECK_HEAP();
  }
  unsigned long runs = 0;
  for (uint32_t id = 1; id < fit_arena_count(); id++) {
    fit_arena_t *a = fit_arena_by_id(id);
    if (a && a->index_kind != FIT_INDEX_NONE)
      for (fit_run_t *r = a->runs; r; r = r->next) runs++;
  }
  CHECK(runs > 8); /* the runs really did interleave */
  CHECK_HEAP();
}

int main(void) {
  int failed = 0;
  for (size_t i = 0; i < FIT_TEST_API_COUNT; i++) failed += fit_test_run("random", case_random, &fit_test_apis[i]);
  failed += fit_test_run("interleaved", case_interleaved, NULL);
  printf("%d failed\n", failed);
  return failed ? 1 : 0;
}
