/* test_fit_basic.c — named correctness cases for every variant of
 * libmymalloc (ff, bf, ts_lock, ts_nolock), each in a fresh child process:
 * split and reuse, coalescing with the next, the previous and both
 * neighbours, the first-fit / best-fit choice, malloc(0) and free(NULL),
 * alignment, data-segment accounting against sbrk(0) (also when someone else
 * moves the break between our calls), the free-predecessor hint, requests too large to serve, bad frees
 * reported and ignored, and frees through another variant's free function.
 * CTest runs it once per implementation (TESSERA_FIT_IMPL=naive / fast).
 */
#include "fit_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>

/* Free bytes of the arena that owns p. */
static unsigned long arena_free(void *p) {
  return atomic_load_explicit(&fit_test_arena_of(p)->free_bytes, memory_order_relaxed);
}

static void case_split_and_reuse(const fit_test_api_t *api) {
  char *low_guard = api->alloc(64);
  char *p = api->alloc(4000);
  char *high_guard = api->alloc(64);
  CHECK(low_guard && p && high_guard);
  unsigned long seg = get_data_segment_size();
  unsigned long before = arena_free(p);
  fit_arena_t *a = fit_test_arena_of(p);
  api->release(p);
  CHECK(arena_free(low_guard) == before + fit_test_block_size(4000));
  CHECK_HEAP();

  /* Split: the request is carved from p's block, the rest stays free. */
  char *q = api->alloc(1000);
  CHECK(q >= p && q + 1000 <= p + 4000);
  CHECK(get_data_segment_size() == seg);
  CHECK(atomic_load(&a->free_bytes) == before + fit_test_block_size(4000) - fit_test_block_size(1000));
  memset(q, 0x5a, 1000);
  CHECK_HEAP();

  /* Freeing it coalesces with the remainder; the whole block is reusable. */
  api->release(q);
  CHECK(atomic_load(&a->free_bytes) == before + fit_test_block_size(4000));
  char *r = api->alloc(4000);
  CHECK(r == p);
  CHECK(get_data_segment_size() == seg);
  CHECK_HEAP();
  api->release(r);
  api->release(low_guard);
  api->release(high_guard);
  CHECK_HEAP();
}

/* Three neighbours a, b, c between guards; free order decides which merge
 * each free exercises. After the third free they must be one block. */
static void coalesce_order(const fit_test_api_t *api, int first, int second, int third) {
  char *guard0 = api->alloc(64);
  char *blk[3];
  for (int i = 0; i < 3; i++) blk[i] = api->alloc(1000);
  char *guard1 = api->alloc(64);
  CHECK(guard0 && blk[0] && blk[1] && blk[2] && guard1);
  for (int i = 0; i < 2; i++) CHECK(blk[i] + fit_test_block_size(1000) == blk[i + 1] ||
                                    blk[i + 1] + fit_test_block_size(1000) == blk[i]);
  fit_arena_t *a = fit_test_arena_of(guard0);
  unsigned long before = atomic_load(&a->free_bytes);
  unsigned long seg = get_data_segment_size();
  int order[3] = {first, second, third};
  for (int i = 0; i < 3; i++) {
    api->release(blk[order[i]]);
    CHECK_HEAP(); /* includes "no two adjacent free blocks" */
  }
  CHECK(atomic_load(&a->free_bytes) == before + 3 * fit_test_block_size(1000));
  /* One block of three: a request for all of it needs no new memory. */
  char *low = blk[0] < blk[2] ? blk[0] : blk[2];
  char *all = api->alloc(3 * fit_test_block_size(1000) - FIT_HEADER_SIZE);
  CHECK(all == low);
  CHECK(get_data_segment_size() == seg);
  api->release(all);
  api->release(guard0);
  api->release(guard1);
  CHECK_HEAP();
}

/* Each order in its own fresh heap, so the merged block is the only free one. */
static void case_coalesce_both(const fit_test_api_t *api) { coalesce_order(api, 0, 2, 1); }
static void case_coalesce_prev_next(const fit_test_api_t *api) { coalesce_order(api, 1, 0, 2); }
static void case_coalesce_next_prev(const fit_test_api_t *api) { coalesce_order(api, 2, 1, 0); }

/* The prev_free byte of the block after a hole: set when the hole is
 * freed, cleared by a split of the hole (the block in front is then in
 * use), left stale by an exact fit; a free that finds it stale must not
 * merge with the block in use in front (and clears it), while a free with a
 * true one must merge. */
static void case_prev_hint(const fit_test_api_t *api) {
  char *guard0 = api->alloc(64);
  char *hole = api->alloc(2000);
  char *b = api->alloc(500);
  char *guard1 = api->alloc(64);
  CHECK(guard0 && hole && b && guard1);
  CHECK(hole + fit_test_block_size(2000) == b && b + fit_test_block_size(500) == guard1);
  fit_arena_t *a = fit_test_arena_of(b);
  fit_block_t *bh = fit_header_of(b), *g1 = fit_header_of(guard1);
  unsigned long before = atomic_load(&a->free_bytes);
  api->release(hole);
  CHECK(bh->prev_free == 1);
  /* Split: guard0 was allocated before b, so the request is carved from
   * the end next to b (the more recent neighbour), right in front of b. */
  char *x = api->alloc(1000);
  CHECK(x + fit_test_block_size(1000) == b);
  CHECK(bh->prev_free == 0 && fit_header_of(x)->prev_free == 1);
  CHECK_HEAP();
  /* x merges back into the hole; the whole hole is then an exact fit. */
  api->release(x);
  CHECK(bh->prev_free == 1);
  char *y = api->alloc(2000);
  CHECK(y == hole);
  CHECK(atomic_load(&a->free_bytes) == before);
  CHECK(bh->prev_free == 1); /* stale: an exact fit does not clear it */
  /* Freeing b must leave y alone, and clear the stale byte. */
  api->release(b);
  CHECK(atomic_load(&a->free_bytes) == before + fit_test_block_size(500));
  CHECK(fit_size(fit_header_of(y)) == fit_test_block_size(2000) && !fit_is_free(fit_header_of(y)));
  CHECK(fit_is_free(bh) && fit_size(bh) == fit_test_block_size(500));
  CHECK(bh->prev_free == 0 && g1->prev_free == 1);
  CHECK_HEAP();
  memset(y, 0x11, 2000);
  /* Freeing y merges it with b behind it. */
  api->release(y);
  CHECK(atomic_load(&a->free_bytes) == before + fit_test_block_size(2000) + fit_test_block_size(500));
  CHECK(fit_size(fit_header_of(y)) == fit_test_block_size(2000) + fit_test_block_size(500));
  CHECK(g1->prev_free == 1);
  CHECK_HEAP();
  api->release(guard0);
  api->release(guard1);
  CHECK_HEAP();
}

/* bf_free turns prev_free into a mask (-(size_t)prev_free), so the byte
 * must be exactly 0 or 1: the checker says so when it is not. */
static void case_prev_hint_is_a_bit(const fit_test_api_t *api) {
  char *guard = api->alloc(64); /* so p is not the first block of its run */
  char *p = api->alloc(200);
  CHECK(guard && p);
  fit_block_t *h = fit_header_of(p);
  CHECK(h->prev_units != 0);
  fit_arena_t *a = fit_test_arena_of(p);
  uint8_t saved = h->prev_free;
  char err[200];
  h->prev_free = 2;
  CHECK(fit_check_arena(a, err, sizeof err) != 0);
  h->prev_free = saved;
  CHECK(fit_check_arena(a, err, sizeof err) == 0);
  api->release(p);
  api->release(guard);
  CHECK_HEAP();
}

/* bf_malloc's fast path does not test the arena's index kind: an arena
 * that is not binned (first fit, the naive versions) must keep its bins
 * empty, and the checker says so when one is not. */
static void case_unbinned_bins_empty(const fit_test_api_t *api) {
  char *p = api->alloc(200);
  CHECK(p);
  fit_arena_t *a = fit_test_arena_of(p);
  char err[200];
  CHECK(fit_check_arena(a, err, sizeof err) == 0);
  if (a->index_kind != FIT_INDEX_SIZE_BINS) {
    a->bins[13] = fit_header_of(p);
    CHECK(fit_check_arena(a, err, sizeof err) != 0);
    a->bins[13] = NULL;
    a->bin_bits[0] = 1u << 13;
    CHECK(fit_check_arena(a, err, sizeof err) != 0);
    a->bin_bits[0] = 0;
    CHECK(fit_check_arena(a, err, sizeof err) == 0);
  }
  api->release(p);
  CHECK_HEAP();
}

/* Which end of a hole a split hands out. Fast best fit (the size bins):
 * the end next to the more recently allocated neighbour, so the remainder
 * waits next to the older one; the naive versions and first fit always carve
 * from the back. Both orders of the neighbours' ages are checked (two
 * cases, each on a fresh heap), so a rule that always took one end fails
 * one of them. */
static void carve_side(const fit_test_api_t *api, int younger_is_next) {
  {
    char *g0 = api->alloc(64);
    char *hole = api->alloc(3000);
    char *g1 = api->alloc(64);
    CHECK(g0 && hole && g1 && hole + fit_test_block_size(3000) == g1);
    if (!younger_is_next) {
      /* Make g0 the younger neighbour: free it and take it again (an exact
       * fit hands back the same block, stamped now). */
      api->release(g0);
      char *again = api->alloc(64);
      CHECK(again == g0);
    }
    fit_arena_t *a = fit_test_arena_of(hole);
    int age_rule = a->index_kind == FIT_INDEX_SIZE_BINS;
    api->release(hole);
    char *x = api->alloc(1000);
    CHECK(x != NULL);
    int front = x == hole, back = x + fit_test_block_size(1000) == g1;
    CHECK(front || back);
    if (age_rule)
      CHECK(younger_is_next ? back : front);
    else
      CHECK(back);
    CHECK(atomic_load(&a->free_bytes) >= fit_test_block_size(3000) - fit_test_block_size(1000));
    CHECK_HEAP();
    memset(x, 0x5a, 1000);
    /* Freed, x merges with the remainder again, whichever side it was on. */
    api->release(x);
    CHECK(fit_is_free(fit_header_of(hole)) && fit_size(fit_header_of(hole)) == fit_test_block_size(3000));
    CHECK_HEAP();
    api->release(g0);
    api->release(g1);
    CHECK_HEAP();
  }
}
static void case_carve_next_younger(const fit_test_api_t *api) { carve_side(api, 1); }
static void case_carve_prev_younger(const fit_test_api_t *api) { carve_side(api, 0); }

static void case_policy(const fit_test_api_t *api) {
  char *h[3], *spacer[3];
  size_t sizes[3] = {2000, 500, 1000};
  char *first = api->alloc(64);
  for (int i = 0; i < 3; i++) {
    h[i] = api->alloc(sizes[i]);
    spacer[i] = api->alloc(64);
    CHECK(h[i] && spacer[i]);
  }
  /* Fresh heap: blocks come out in address order. */
  CHECK(first < h[0] && h[0] < h[1] && h[1] < h[2]);
  for (int i = 0; i < 3; i++) api->release(h[i]);
  CHECK_HEAP();
  /* end[i]: where hole i's payload ends */
  char *end[3];
  for (int i = 0; i < 3; i++) end[i] = h[i] + fit_test_block_size(sizes[i]) - FIT_HEADER_SIZE;
  char *x = api->alloc(400);
  if (api->best_fit)
    CHECK(x >= h[1] && x + 400 <= end[1]); /* smallest that fits */
  else
    CHECK(x >= h[0] && x + 400 <= end[0]); /* lowest address that fits */
  char *y = api->alloc(1000);
  if (api->best_fit)
    CHECK(y == h[2]); /* exact fit */
  else
    CHECK(y >= h[0] && y + 1000 <= end[0]);
  api->release(x);
  api->release(y);
  CHECK_HEAP();
}

static void case_zero_null_alignment(const fit_test_api_t *api) {
  unsigned long seg = get_data_segment_size(), fr = get_data_segment_free_space_size();
  api->release(NULL);
  CHECK(get_data_segment_size() == seg && get_data_segment_free_space_size() == fr);
  char *z1 = api->alloc(0), *z2 = api->alloc(0);
  CHECK(z1 && z2 && z1 != z2);
  void *ps[64];
  for (int i = 0; i < 64; i++) {
    ps[i] = api->alloc((size_t)i * 37 + 1);
    CHECK(ps[i] && (uintptr_t)ps[i] % 16 == 0);
    memset(ps[i], i, (size_t)i * 37 + 1);
  }
  for (int i = 0; i < 64; i++) {
    unsigned char *c = ps[i];
    for (size_t k = 0; k < (size_t)i * 37 + 1; k++) CHECK(c[k] == (unsigned char)i);
    api->release(ps[i]);
  }
  api->release(z1);
  api->release(z2);
  CHECK_HEAP();
}

/* get_data_segment_size() moves exactly as the break does for our calls,
 * and a gap made by someone else is never bridged. */
static void case_segment_accounting(const fit_test_api_t *api) {
  char *warm = api->alloc(16); /* first use: thread arena claim etc. */
  CHECK(warm);
  char *brk0 = sbrk(0);
  unsigned long seg0 = get_data_segment_size();
  char *p = api->alloc(100000);
  char *brk1 = sbrk(0);
  unsigned long seg1 = get_data_segment_size();
  CHECK(p && seg1 > seg0);
  CHECK((unsigned long)(brk1 - brk0) == seg1 - seg0);

  /* Someone else takes 4096 bytes of break: our next run starts after it. */
  char *foreign = sbrk(4096);
  CHECK(foreign == brk1);
  memset(foreign, 0xee, 4096);
  char *q = api->alloc(100000);
  char *brk2 = sbrk(0);
  unsigned long seg2 = get_data_segment_size();
  CHECK(q && (q > foreign + 4096 || q + 100000 <= foreign));
  CHECK((unsigned long)(brk2 - brk1) - 4096 == seg2 - seg1);
  CHECK_HEAP();

  /* Free both sides of the gap: they must not merge across it. */
  api->release(p);
  api->release(q);
  CHECK_HEAP();
  for (int i = 0; i < 4096; i++) CHECK((unsigned char)foreign[i] == 0xee);
  char *both = api->alloc(2 * 100000 + 1000);
  CHECK(both && (both + 2 * 100000 + 1000 <= foreign || both >= foreign + 4096));
  CHECK(get_data_segment_size() > seg2); /* needed new memory */
  memset(both, 1, 2 * 100000 + 1000);
  for (int i = 0; i < 4096; i++) CHECK((unsigned char)foreign[i] == 0xee);
  api->release(both);
  api->release(warm);
  CHECK_HEAP();
  CHECK(get_data_segment_free_space_size() <= get_data_segment_size());
}

static void case_too_large(const fit_test_api_t *api) {
  unsigned long seg = get_data_segment_size();
  errno = 0;
  CHECK(api->alloc(SIZE_MAX) == NULL && errno == ENOMEM);
  errno = 0;
  CHECK(api->alloc(SIZE_MAX - 8) == NULL && errno == ENOMEM);
  errno = 0;
  CHECK(api->alloc((size_t)1 << 46) == NULL && errno == ENOMEM); /* 64 TiB: sbrk refuses */
  CHECK(get_data_segment_size() == seg);
  char *p = api->alloc(100);
  CHECK(p);
  memset(p, 3, 100);
  api->release(p);
  CHECK_HEAP();
}

/* Requests around the largest exact-size bin (fast best fit switches from
 * bins to its tree there): every size must round-trip, and frees and reuse
 * must keep the heap consistent. (Under UBSan this caught an index one past
 * the bins.) */
static void case_bin_boundary(const fit_test_api_t *api) {
  enum { N = 48 };
  char *p[N];
  size_t base = FIT_BIN_LIMIT - FIT_HEADER_SIZE - N / 2;
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < N; i++) {
      p[i] = api->alloc(base + (size_t)i);
      CHECK(p[i] != NULL);
      CHECK(fit_size(fit_header_of(p[i])) >= fit_test_block_size(base + (size_t)i));
      memset(p[i], i, base + (size_t)i);
    }
    CHECK_HEAP();
    for (int i = 0; i < N; i += 2) api->release(p[i]); /* holes, reused next round */
    for (int i = 1; i < N; i += 2) {
      for (size_t k = 0; k < base + (size_t)i; k += 4096) CHECK(p[i][k] == (char)i);
      api->release(p[i]);
    }
    CHECK_HEAP();
  }
}

/* Runs fn with stderr captured; returns what it wrote. */
static void capture_stderr(void (*fn)(const fit_test_api_t *), const fit_test_api_t *api, char *out,
                           size_t outlen) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  int saved = dup(2);
  dup2(fds[1], 2);
  close(fds[1]);
  fn(api);
  dup2(saved, 2);
  close(saved);
  ssize_t n = read(fds[0], out, outlen - 1);
  out[n > 0 ? n : 0] = 0;
  close(fds[0]);
}

static char *bad_free_block;
static void do_double_free(const fit_test_api_t *api) {
  api->release(bad_free_block);
  api->release(bad_free_block);
}
static _Alignas(16) char fake_block[64];
static void do_foreign_free(const fit_test_api_t *api) { api->release(fake_block + 16); }
static void do_misaligned_free(const fit_test_api_t *api) { api->release(bad_free_block + 1); }
/* Pointers whose header is not mapped at all: read, it was a SIGSEGV. */
static void do_wild_frees(const fit_test_api_t *api) {
  api->release((void *)16);
  api->release((void *)4096);
  api->release((void *)(uintptr_t)0x7f0000001000ull);
}

static void case_bad_free(const fit_test_api_t *api) {
  char *guard = api->alloc(64);
  bad_free_block = api->alloc(100);
  char *keep = api->alloc(100);
  memset(keep, 7, 100);
  fit_arena_t *a = fit_test_arena_of(keep);
  char msg[512];
  capture_stderr(do_double_free, api, msg, sizeof msg);
  CHECK(strstr(msg, "tessera fit: ") && strstr(msg, "double free; ignored"));
  CHECK(atomic_load(&a->free_bytes) >= fit_test_block_size(100));
  unsigned long fr = atomic_load(&a->free_bytes);
  capture_stderr(do_foreign_free, api, msg, sizeof msg);
  CHECK(strstr(msg, "not a block from this allocator; ignored"));
  capture_stderr(do_misaligned_free, api, msg, sizeof msg);
  CHECK(strstr(msg, "not a block from this allocator; ignored"));
  capture_stderr(do_wild_frees, api, msg, sizeof msg);
  CHECK(strstr(msg, "(0x10): not a block from this allocator; ignored") &&
        strstr(msg, "(0x1000): not a block from this allocator; ignored") &&
        strstr(msg, "(0x7f0000001000): not a block from this allocator; ignored"));
  CHECK(atomic_load(&a->free_bytes) == fr);
  CHECK_HEAP();
  for (int i = 0; i < 100; i++) CHECK(keep[i] == 7);
  api->release(keep);
  api->release(guard);
  CHECK_HEAP();
}

/* A block that merged into its free predecessor, freed again: its header
 * lies inside the merged block now, and must still say free. Before, the
 * second free tore the live neighbour out of the merged block and a later
 * malloc handed out memory overlapping it. */
static char *merged_block;
static void do_free_merged_again(const fit_test_api_t *api) { api->release(merged_block); }

static void case_double_free_merged(const fit_test_api_t *api) {
  char *guard = api->alloc(64);
  char *p[3];
  for (int i = 0; i < 3; i++) p[i] = api->alloc(100);
  /* In address order x < y < z, each the physical successor of the last. */
  for (int i = 0; i < 3; i++)
    for (int j = i + 1; j < 3; j++)
      if (p[j] < p[i]) {
        char *t = p[i];
        p[i] = p[j];
        p[j] = t;
      }
  CHECK(fit_next_phys(fit_header_of(p[0])) == fit_header_of(p[1]));
  CHECK(fit_next_phys(fit_header_of(p[1])) == fit_header_of(p[2]));
  memset(p[2], 5, 100);
  fit_arena_t *a = fit_test_arena_of(p[2]);
  api->release(p[0]);
  api->release(p[1]); /* merges into p[0]'s free block */
  unsigned long fr = atomic_load(&a->free_bytes);
  char msg[512];
  merged_block = p[1];
  capture_stderr(do_free_merged_again, api, msg, sizeof msg);
  CHECK(strstr(msg, "double free; ignored"));
  CHECK(atomic_load(&a->free_bytes) == fr);
  CHECK_HEAP();
  char *big = api->alloc(300); /* must not overlap the live z */
  CHECK(big != NULL);
  CHECK(big + 300 <= p[2] - FIT_HEADER_SIZE || big >= p[2] + 100);
  memset(big, 9, 300);
  for (int i = 0; i < 100; i++) CHECK(p[2][i] == 5);
  api->release(big);
  api->release(p[2]);
  api->release(guard);
  CHECK_HEAP();
}

/* Every free function sends a block home, whichever malloc made it. */
static void case_cross_free(const fit_test_api_t *api) {
  for (size_t other = 0; other < FIT_TEST_API_COUNT; other++) {
    char *p = api->alloc(300);
    memset(p, 9, 300);
    fit_arena_t *home = fit_test_arena_of(p);
    unsigned long before = atomic_load(&home->free_bytes);
    fit_test_apis[other].release(p);
    CHECK(atomic_load(&home->free_bytes) >= before + fit_test_block_size(300));
    CHECK_HEAP();
  }
}

int main(void) {
  static const struct {
    const char *name;
    void (*fn)(const fit_test_api_t *);
  } cases[] = {
      {"split_and_reuse", case_split_and_reuse}, {"coalesce_both", case_coalesce_both},
      {"coalesce_prev_next", case_coalesce_prev_next}, {"coalesce_next_prev", case_coalesce_next_prev},
      {"policy", case_policy},                   {"zero_null_alignment", case_zero_null_alignment},
      {"segment_accounting", case_segment_accounting}, {"too_large", case_too_large},
      {"bad_free", case_bad_free},             {"bin_boundary", case_bin_boundary},               {"cross_free", case_cross_free},
      {"prev_hint", case_prev_hint},           {"carve_next_younger", case_carve_next_younger},
      {"carve_prev_younger", case_carve_prev_younger}, {"double_free_merged", case_double_free_merged},
      {"prev_hint_is_a_bit", case_prev_hint_is_a_bit}, {"unbinned_bins_empty", case_unbinned_bins_empty},
  };
  const char *impl = getenv("TESSERA_FIT_IMPL");
  printf("implementation: %s\n", impl && strcmp(impl, "naive") == 0 ? "naive" : "fast");
  int failed = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (size_t i = 0; i < FIT_TEST_API_COUNT; i++) failed += fit_test_run(cases[c].name, cases[c].fn, &fit_test_apis[i]);
  printf("%d failed\n", failed);
  return failed ? 1 : 0;
}
