/* test_policy_cases: the textbook cases of every registered lab policy, at
 * alignment 8 and 16: split, the four coalescing cases, every realloc case,
 * heap exhaustion (NULL with errno = ENOMEM and a consistent heap), and that
 * the checker really catches corrupted tags. Each case runs the policy's
 * check() after every step. Table-driven over lab_policies(), so a new
 * policy is tested by being registered.
 *
 * Every case runs twice: on the narrow block format (a fresh heap), and on
 * the wide one: fresh() first allocates a 3 GiB block, beyond the narrow
 * format, which opens the heap's wide region (lab/heap_core.h), so every
 * block of the case is a wide block (8-byte tags, 64-bit links) after it.
 * The heap is MAP_NORESERVE address space: only tags and test data are
 * touched. The wide run adds a growth that mem_sbrk grants only in part. */
#include "memlib.h"
#include "policy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static const lab_policy_t *pol;
static size_t align;
static int wide_mode;   /* fresh() opens the wide region first */
static void *opener;    /* the block that opened it */

#define GIB ((size_t)1 << 30)
/* Beyond the narrow format's 2 GiB blocks: opens the wide region. */
#define WIDE_OPENER (3 * GIB)

/* The heap cap of the mode (0: memlib's default, 128 MiB). */
static size_t mode_cap(void) { return wide_mode ? 64 * GIB : 0; }

#define EXPECT(cond, ...)                                                        \
  do {                                                                           \
    if (!(cond)) {                                                               \
      failures++;                                                                \
      fprintf(stderr, "FAIL %s align %zu %s line %d: %s: ", pol->name, align,    \
              wide_mode ? "wide" : "narrow", __LINE__, #cond);                   \
      fprintf(stderr, __VA_ARGS__);                                              \
      fputc('\n', stderr);                                                       \
    }                                                                            \
  } while (0)

static void checked(const char *step) {
  char err[256];
  int rc = pol->check(err, sizeof err);
  EXPECT(rc == 0, "after %s: %s", step, err);
}

static void fresh(void) {
  mem_reset_brk();
  int rc = pol->init(align);
  EXPECT(rc == 0, "init failed");
  checked("init");
  if (wide_mode) {
    opener = pol->malloc(WIDE_OPENER);
    EXPECT(opener != NULL, "the %zu-byte block that opens the wide region: NULL", WIDE_OPENER);
    checked("open the wide region");
  }
}

/* A block the case allocates must be in the region the case is about: in
 * wide mode above the opener (the narrow region is empty and full). */
static void in_region(void *p, const char *step) {
  if (!wide_mode || !p) return;
  EXPECT((char *)p > (char *)opener, "%s: block %p is not in the wide region (opener %p)", step,
         p, opener);
}

static void *alloc(size_t n, const char *step) {
  void *p = pol->malloc(n);
  EXPECT(p != NULL, "malloc(%zu) in %s returned NULL", n, step);
  if (!p) return NULL;
  EXPECT((uintptr_t)p % align == 0, "malloc(%zu) = %p not %zu-aligned", n, p, align);
  EXPECT((char *)p >= (char *)mem_heap_lo() && (char *)p + n - 1 <= (char *)mem_heap_hi(),
         "malloc(%zu) = %p outside the heap", n, p);
  in_region(p, step);
  checked(step);
  return p;
}

static void fill(void *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = (unsigned char)(seed * 31 + i);
}

static int intact(const void *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != (unsigned char)(seed * 31 + i)) return 0;
  return 1;
}

static int is_inplace_realloc(void) {
  static const char *const names[] = {"segregated-realloc", "segregated-apart", "tree-best",
                                      "tree-best-apart"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(pol->name, names[i])) return 1;
  return 0;
}

/* Large enough to stay out of any small-block arrangement. */
#define BIG 200

static void test_basics(void) {
  fresh();
  EXPECT(pol->malloc(0) == NULL, "malloc(0) must return NULL");
  pol->free(NULL);
  checked("free(NULL)");
  void *p = pol->realloc(NULL, 40);
  EXPECT(p != NULL, "realloc(NULL, 40) must allocate");
  checked("realloc(NULL)");
  EXPECT(pol->realloc(p, 0) == NULL, "realloc(p, 0) must return NULL");
  checked("realloc(p, 0)");
  for (size_t n = 1; n <= 100; n++) {
    void *q = alloc(n, "sizes 1..100");
    if (q) fill(q, n, (unsigned)n);
  }
}

/* A freed block is split: a smaller request reuses it without growing the
 * heap, and the rest is still usable without growing it either. */
static void test_split(void) {
  fresh();
  void *a = alloc(1000, "split: a");
  void *guard = alloc(BIG, "split: guard");
  (void)guard;
  pol->free(a);
  checked("split: free a");
  size_t heap = mem_heapsize();
  void *b = alloc(400, "split: b");
  EXPECT(mem_heapsize() == heap, "400 bytes out of a free 1000 grew the heap");
  EXPECT((char *)b >= (char *)a && (char *)b + 400 <= (char *)a + 1008,
         "the 400 bytes are not inside the freed block");
  void *c = alloc(500, "split: c");
  EXPECT(mem_heapsize() == heap, "the rest of the split block was not reusable");
  EXPECT((char *)c >= (char *)a && (char *)c + 500 <= (char *)a + 1008,
         "the 500 bytes are not inside the freed block");
}

/* The four neighbour cases of free: after freeing, a request that only fits
 * in the merged block must not grow the heap. */
static void coalesce_case(int free_prev, int free_next, const char *name) {
  fresh();
  void *a = alloc(BIG, name), *b = alloc(BIG, name), *c = alloc(BIG, name);
  void *guard = alloc(BIG, name);
  (void)guard;
  if (free_prev) pol->free(a);
  if (free_next) pol->free(c);
  pol->free(b);
  checked(name);
  size_t heap = mem_heapsize();
  size_t merged = (size_t)(1 + free_prev + free_next) * BIG;
  void *m = alloc(merged, name);
  EXPECT(mem_heapsize() == heap, "%s: %zu bytes did not fit in the merged block", name, merged);
  void *expect_at = free_prev ? a : b;
  EXPECT(m == expect_at, "%s: merged block at %p, expected %p", name, m, expect_at);
  if (!free_prev && !free_next) {
    /* b alone must not have merged with its allocated neighbours. */
    size_t before = mem_heapsize();
    void *big = alloc(2 * BIG, "no coalesce: bigger request");
    EXPECT(mem_heapsize() > before, "a request larger than the freed block did not grow the heap");
    (void)big;
  }
}

static void test_coalesce(void) {
  coalesce_case(0, 0, "coalesce: both neighbours allocated");
  coalesce_case(1, 0, "coalesce: previous free");
  coalesce_case(0, 1, "coalesce: next free");
  coalesce_case(1, 1, "coalesce: both free");
}

static void test_realloc(void) {
  int inplace = is_inplace_realloc();
  /* shrink */
  fresh();
  void *p = alloc(1000, "realloc shrink");
  fill(p, 1000, 1);
  void *guard = alloc(BIG, "realloc shrink guard");
  void *q = pol->realloc(p, 300);
  checked("realloc shrink");
  EXPECT(q && intact(q, 300, 1), "shrink lost the contents");
  if (inplace) {
    EXPECT(q == p, "shrink moved the block");
    size_t heap = mem_heapsize();
    void *r = alloc(500, "realloc shrink: reuse the tail");
    EXPECT(mem_heapsize() == heap && (char *)r > (char *)q,
           "the freed tail of a shrunk block was not reused");
  }
  /* grow into a free next block */
  fresh();
  p = alloc(BIG, "grow next");
  fill(p, BIG, 2);
  void *n = alloc(600, "grow next: neighbour");
  guard = alloc(BIG, "grow next: guard");
  pol->free(n);
  checked("grow next: free neighbour");
  size_t heap = mem_heapsize();
  q = pol->realloc(p, 700);
  checked("grow next");
  EXPECT(q && intact(q, BIG, 2), "grow into next lost the contents");
  if (inplace) EXPECT(q == p && mem_heapsize() == heap, "grow into a free next block moved");
  /* grow at the end of the heap: only the missing part is added */
  fresh();
  guard = alloc(BIG, "grow end: first");
  p = alloc(2000, "grow end");
  fill(p, 2000, 3);
  heap = mem_heapsize();
  q = pol->realloc(p, 3000);
  checked("grow end");
  EXPECT(q && intact(q, 2000, 3), "grow at the heap end lost the contents");
  if (inplace)
    EXPECT(q == p && mem_heapsize() - heap <= 1000 + 16,
           "grow at the end moved or grew the heap by %zu", mem_heapsize() - heap);
  /* move: both neighbours allocated and not at the end */
  fresh();
  void *before = alloc(BIG, "move: before");
  p = alloc(BIG, "move");
  fill(p, BIG, 4);
  void *after = alloc(BIG, "move: after");
  q = pol->realloc(p, 5000);
  checked("move");
  EXPECT(q && q != p && intact(q, BIG, 4), "a blocked realloc did not move with its contents");
  fill(q, 5000, 5);
  void *again = pol->realloc(q, 9000);
  checked("move: grow again");
  EXPECT(again && intact(again, 5000, 5), "second growth lost the contents");
  (void)before;
  (void)after;
  (void)guard;
}

static void test_exhaustion(void) {
  EXPECT(mem_init_cap((256 << 10) + (wide_mode ? WIDE_OPENER + (64 << 10) : 0)) == 0,
         "mem_init_cap failed");
  fresh();
  void *ptrs[4096];
  size_t count = 0;
  errno = 0;
  for (; count < 4096; count++) {
    ptrs[count] = pol->malloc(1000 + count % 7 * 100);
    if (!ptrs[count]) break;
    fill(ptrs[count], 1000, (unsigned)count);
  }
  EXPECT(count > 0 && count < 4096, "the 256 KiB heap never ran out (%zu blocks)", count);
  EXPECT(errno == ENOMEM, "exhaustion did not set errno to ENOMEM");
  checked("exhaustion");
  errno = 0;
  EXPECT(pol->malloc((size_t)1 << 40) == NULL && errno == ENOMEM,
         "an impossible request did not fail with ENOMEM");
  checked("impossible request");
  if (count) {
    void *r = pol->realloc(ptrs[0], (size_t)1 << 20);
    EXPECT(r == NULL, "realloc beyond the cap succeeded");
    EXPECT(intact(ptrs[0], 1000, 0), "a failed realloc damaged the block");
    checked("failed realloc");
  }
  for (size_t i = 0; i < count; i += 2) pol->free(ptrs[i]);
  checked("free half");
  void *again = pol->malloc(1000);
  EXPECT(again != NULL, "no reuse after freeing half of an exhausted heap");
  for (size_t i = 1; i < count; i += 2)
    EXPECT(intact(ptrs[i], 1000, (unsigned)i), "block %zu damaged by exhaustion", i);
  checked("after exhaustion");
  EXPECT(mem_init_cap(mode_cap()) == 0, "restoring the cap failed");
}

/* A header or footer word of the case's width. */
static uint64_t word_get(void *p) {
  if (wide_mode) return *(uint64_t *)p;
  return *(uint32_t *)p;
}
static void word_put(void *p, uint64_t v) {
  if (wide_mode) *(uint64_t *)p = v;
  else *(uint32_t *)p = (uint32_t)v;
}

/* The checker must see damage: a footer that disagrees with its header, and
 * an allocated block's size pointing into the middle of another block. */
static void test_checker_catches(void) {
  char err[256];
  size_t word = wide_mode ? 8 : 4;
  fresh();
  void *a = alloc(BIG, "checker"), *b = alloc(BIG, "checker"), *c = alloc(BIG, "checker");
  (void)c;
  pol->free(b);
  checked("checker: free b");
  char *hdr_b = (char *)b - word;
  uint64_t size_b = word_get(hdr_b) & ~(uint64_t)7;
  char *ftr_b = hdr_b + size_b - word;
  uint64_t saved = word_get(ftr_b);
  word_put(ftr_b, saved ^ 8);
  EXPECT(pol->check(err, sizeof err) != 0, "a corrupted free footer went unnoticed");
  word_put(ftr_b, saved);
  checked("checker: footer restored");
  char *hdr_a = (char *)a - word;
  saved = word_get(hdr_a);
  word_put(hdr_a, saved + 8);
  EXPECT(pol->check(err, sizeof err) != 0, "a corrupted allocated header went unnoticed");
  word_put(hdr_a, saved);
  checked("checker: header restored");
  word_put(hdr_b, word_get(hdr_b) | 1); /* a free block marked allocated (still in any list) */
  EXPECT(pol->check(err, sizeof err) != 0, "an allocated-looking free block went unnoticed");
  word_put(hdr_b, word_get(hdr_b) & ~(uint64_t)1);
  checked("checker: alloc bit restored");
  if (wide_mode) {
    /* A size only 64 bits can hold must be read whole: set a high bit. */
    saved = word_get(hdr_a);
    word_put(hdr_a, saved | ((uint64_t)1 << 40));
    EXPECT(pol->check(err, sizeof err) != 0, "a header with bit 40 set went unnoticed");
    word_put(hdr_a, saved);
    checked("checker: high size bit restored");
  }
}

/* implicit-next only: CS:APP's rover. A search that finds nothing leaves
 * it in place (the next fitting request resumes there, not at the heap
 * start), and when the rover's free block merges into the block before it,
 * the rover moves to the merged block. Both used to send the next search
 * back to the heap start. Blocks of 16 bytes, so each is one slot apart. */
static void test_next_fit_rover(void) {
  if (strcmp(pol->name, "implicit-next") != 0) return;
  fresh();
  char *b[8];
  for (int i = 0; i < 6; i++) b[i] = alloc(16, "rover: six blocks");
  pol->free(b[0]);
  pol->free(b[2]);
  pol->free(b[4]);
  checked("rover: three holes");
  char *x = alloc(16, "rover: first hole");
  char *y = alloc(16, "rover: second hole");
  EXPECT(x == b[0] && y == b[2], "next fit took %p and %p, not the holes %p and %p", (void *)x, (void *)y,
         (void *)b[0], (void *)b[2]);
  pol->free(b[1]); /* a hole before the rover */
  checked("rover: a hole behind it");
  alloc(100000, "rover: a request no hole fits (the heap grows)");
  char *z = alloc(16, "rover: after the failed search");
  EXPECT(z == b[4], "after a search that found nothing, next fit took %p, not %p where the rover stood (%p is "
         "the heap start's hole)", (void *)z, (void *)b[4], (void *)b[1]);

  fresh();
  for (int i = 0; i < 8; i++) b[i] = alloc(16, "rover merge: eight blocks");
  pol->free(b[3]);
  pol->free(b[6]);
  char *r = alloc(16, "rover merge: the first hole");
  EXPECT(r == b[3], "next fit took %p, not the first hole %p", (void *)r, (void *)b[3]);
  pol->free(r); /* the rover's block is free again */
  pol->free(b[0]);
  pol->free(b[2]); /* merges with the rover's block 3 */
  checked("rover merge: the rover's block merged into its predecessor");
  char *m = alloc(8, "rover merge: next request");
  EXPECT(m == b[2], "after the rover's block merged into block 2, next fit took %p, not the merged block %p "
         "(%p is the heap start's hole)", (void *)m, (void *)b[2], (void *)b[0]);
}

/* Wide only: a growth of several mem_sbrk pieces (each an int) of which the
 * cap grants only the first. The request fails with ENOMEM, the block being
 * realloc'ed is intact, the heap consistent, and the granted bytes are a
 * free block that a later request reuses without growing the heap. */
static void test_partial_growth(void) {
  EXPECT(mem_init_cap(WIDE_OPENER + 3 * GIB) == 0, "mem_init_cap failed");
  fresh();
  void *p = alloc(1000, "partial: a block at the heap end");
  if (p) fill(p, 1000, 7);
  size_t heap = mem_heapsize();
  errno = 0;
  void *q = pol->realloc(p, 5 * GIB);
  EXPECT(q == NULL && errno == ENOMEM, "a realloc beyond the cap returned %p (errno %d)", q,
         errno);
  checked("partial: failed realloc");
  EXPECT(p && intact(p, 1000, 7), "the failed realloc damaged the block");
  EXPECT(mem_heapsize() > heap, "no piece of the growth was granted (heap %zu)", mem_heapsize());
  size_t grown = mem_heapsize();
  errno = 0;
  EXPECT(pol->malloc(5 * GIB) == NULL && errno == ENOMEM, "a malloc beyond the cap succeeded");
  checked("partial: failed malloc");
  void *r = alloc(GIB, "partial: reuse the granted bytes");
  EXPECT(mem_heapsize() == grown, "the granted bytes were not reused (heap %zu, was %zu)",
         mem_heapsize(), grown);
  (void)r;
  EXPECT(mem_init_cap(mode_cap()) == 0, "restoring the cap failed");
}

int main(void) {
  if (mem_init_cap(0) != 0) {
    perror("mem_init_cap");
    return 1;
  }
  size_t n = 0;
  for (const lab_policy_t *const *p = lab_policies(); *p; p++, n++) {
    pol = *p;
    for (wide_mode = 0; wide_mode <= 1; wide_mode++) {
      if (mem_init_cap(mode_cap()) != 0) {
        perror("mem_init_cap");
        return 1;
      }
      for (align = 8; align <= 16; align *= 2) {
        test_basics();
        test_split();
        test_coalesce();
        test_realloc();
        test_exhaustion();
        test_checker_catches();
        test_next_fit_rover();
        if (wide_mode) test_partial_growth();
      }
    }
    wide_mode = 0;
  }
  if (n < 3 || !lab_policy_default() || !lab_policy_find(lab_policy_default()->name)) {
    fprintf(stderr, "FAIL registry: %zu policies, default not findable\n", n);
    failures++;
  }
  if (lab_policy_find("no-such-policy") != NULL) {
    fprintf(stderr, "FAIL registry: an unknown name was found\n");
    failures++;
  }
  for (const lab_policy_t *const *p = lab_policies(); *p; p++)
    for (const lab_policy_t *const *q = p + 1; *q; q++)
      if (!strcmp((*p)->name, (*q)->name)) {
        fprintf(stderr, "FAIL registry: duplicate name %s\n", (*p)->name);
        failures++;
      }
  mem_deinit();
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("policy cases: %zu policies x 2 alignments x 2 block widths passed\n", n);
  return 0;
}
