/* whitebox.c — white-box tests of the hardened build, linked with the
 * hardened static library (tessera_fault_secure; no fault is armed) and
 * its internal header: interleavings and states a program cannot reach
 * through malloc and free alone, or only by chance.
 *
 *   security_whitebox SCENARIO
 *
 * Run with TESSERA_ABORT_ON_ERROR=0; the runner checks the report line and
 * the verdict on stdout.
 *
 * free_count_interior_link: a page's free list whose first block's link
 * (encoded with the page's keys, as only the allocator or someone holding
 * them can write it) points inside a free block, 16 bytes past its start,
 * where a valid encoded NULL waits. Before, the fold's walk
 * (tes_page_free_count) checked only that a link stayed among the page's
 * carved blocks, counted the interior address as a block and ended there
 * (count 2, no report). Now a link must be a block start: the count stops
 * at the first block, reported as a corrupted free list.
 *
 * large_free_race: two threads free one large block at the same moment;
 * the first has passed its checks (tes_secure_check_free) and not yet
 * freed the segment (tes_large_free) when the second frees the block. The
 * second free must be reported as a double free and not free anything:
 * before, it passed (the block still in use) and freed the segment, and
 * the first freed it again (two mallocs then got the same block).
 * large_free_race_late: the second free found the block in use
 * (tes_owned_segment), then the first free ran to its end, then the second
 * went on (tes_secure_check_free): it must say double free; it said
 * "invalid free ... (not a block allocated by tessera)" (2 rounds in
 * 131,000 of two threads racing, before).
 *
 * owner_remote_race, owner_remote_race_delayed: the owner's inline free of
 * a small block and another thread's free of it at the same moment, the
 * owner's read of the block's size word first, then the other thread's
 * whole free (onto the page's remote stack; _delayed: a block of a full
 * page, onto the heap's delayed list), then the owner's tag and push. Both
 * frees passed their checks; the owner's push wrote over the block's remote
 * link, which was then reported as a corrupted free list, and with
 * TESSERA_ABORT_ON_ERROR=0 the block was handed out twice. The owner must
 * report the double free (one line) when it takes the remote free, and
 * never hand the block out twice.
 *
 * medium_bins_only: the hardened bins (tes_sbin_t, 256 bytes each) exist
 * for the medium classes only, heap->sbins[c - TES_MEDIUM_CLASS_FIRST]
 * (tes_sbin_of): the heap struct stays under 12 KiB (11,168 bytes; 19,328
 * with one bin for each of 52 classes, 23,456 for each of 64, twentieth
 * session), and two frees of every medium class go to that class's bin,
 * from which its next malloc takes one. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int free_count_interior_link(void) {
  void *first = malloc(1000); /* class 1,024 in the hardened build: a carve of 8 blocks, 7 left on `free` */
  if (first == NULL) return 2;
  tes_page_t *page = tes_page_of(tes_segment_of(first), first);
  tes_block_t *b = page->free;
  if (b == NULL || tes_block_next(page, b) == NULL) {
    printf("set-up failed: fewer than two blocks on the page's free list\n");
    return 5;
  }
  tes_block_t *interior = (tes_block_t *)((uint8_t *)b + 16);
  tes_block_set_next(page, interior, NULL);
  tes_block_set_next(page, b, interior);
  size_t n = tes_page_free_count(page);
  if (n != 1) {
    printf("the walk counted %zu blocks past a link into a block's inside (1 expected)\n", n);
    return 1;
  }
  printf("the walk stopped at the link into a block's inside\n");
  return 0;
}

enum { LARGE_SIZE = 200000 };

/* A large block and its segment; NULL (after saying why) if set-up failed. */
static tes_segment_t *large_block(char **p) {
  *p = malloc(LARGE_SIZE);
  tes_segment_t *seg = *p != NULL ? tes_owned_segment(*p, false) : NULL;
  if (seg == NULL || seg->kind != TES_SEG_LARGE) {
    printf("set-up failed: not a large block\n");
    return NULL;
  }
  return seg;
}

static int large_free_race(void) {
  enum { SIZE = LARGE_SIZE };
  char *p;
  tes_segment_t *seg = large_block(&p);
  if (seg == NULL) return 5;
  if (!tes_secure_check_free(seg, &seg->pages[0], p)) { /* the first free, checked, not yet carried out */
    printf("the first free was refused\n");
    return 1;
  }
  free(p); /* the second, meanwhile: to be reported, nothing freed */
  tes_large_free(seg); /* the first goes on */
  char *a = malloc(SIZE), *b = malloc(SIZE);
  if (a == NULL || b == NULL) return 2;
  memset(a, 0xaa, SIZE);
  memset(b, 0xbb, SIZE);
  if (a == b || (unsigned char)a[SIZE - 1] != 0xaa) {
    printf("two mallocs got the same large block (%p, %p): its segment was freed twice\n", (void *)a, (void *)b);
    return 1;
  }
  free(a);
  free(b);
  printf("the second free of the large block was refused\n");
  return 0;
}

static int large_free_race_late(void) {
  char *p;
  tes_segment_t *seg = large_block(&p); /* the second free's first look (tes_owned_segment): in use */
  if (seg == NULL) return 5;
  free(p); /* the first free, whole (the segment goes to the cache, mapped) */
  if (tes_secure_check_free(seg, &seg->pages[0], p)) { /* the second goes on */
    printf("the second free of the large block passed\n");
    return 1;
  }
  printf("the second free of the large block was refused\n");
  return 0;
}

static void *free_in_thread(void *p) {
  free(p);
  return NULL;
}

static void *free_rest_in_thread(void *arg) {
  char **rest = arg;
  for (int i = 0; rest[i] != NULL; i++) free(rest[i]);
  return NULL;
}

/* rest: that many blocks after the victim freed by another thread first
 * (under the victim on the remote stack); damaged: the link of the second
 * of them then overwritten (a write after free), so that their chain
 * cannot be told for sure: none of them may come back. */
static size_t list_length(const tes_page_t *page, const tes_block_t *b);
static bool list_has(const tes_page_t *page, const tes_block_t *b, const void *x);

/* single (owner_remote_race_single): the page's free list drained first
 * (count: 0, mallocs until it is), so that the owner's free of the victim
 * makes local_free that block alone, and the collect takes its one-block
 * branch (the remote stack's head held back) with the blocks under the
 * victim found again by remote_rest_find: every block must be on exactly
 * one of the page's lists (review20, twentieth session). */
static int owner_remote_race_at(size_t size, int count, int victim, int rest, bool damaged, bool single) {
  enum { MAX = 2000 };
  static char *blocks[MAX], *under[MAX];
  tes_page_t *first = NULL;
  for (int i = 0; i < (single ? MAX : count); i++) {
    blocks[i] = malloc(size);
    if (blocks[i] == NULL) return 2;
    if (!single) continue;
    if (i == 0) first = tes_page_of(tes_segment_of(blocks[0]), blocks[0]);
    if (tes_page_of(tes_segment_of(blocks[i]), blocks[i]) != first) {
      printf("set-up failed: block %d not from the first block's page\n", i);
      return 5;
    }
    if (first->free == NULL) {
      count = i + 1;
      break;
    }
  }
  if (single && (first->free != NULL || first->local_free != NULL || count <= victim + rest)) {
    printf("set-up failed: the page's free list not drained\n");
    return 5;
  }
  for (int i = 0; i < rest; i++) under[i] = blocks[victim + 1 + i];
  pthread_t r;
  if (rest > 0 && (pthread_create(&r, NULL, free_rest_in_thread, under) != 0 || pthread_join(r, NULL) != 0)) return 6;
  if (damaged) memset(under[1], 0x41, sizeof(void *));
  char *x = blocks[victim];
  tes_page_t *page = tes_page_of(tes_segment_of(x), x);
  uint32_t *word = tes_secure_size_word(page, x);
  uint32_t seen = *word; /* the owner's free reads the size word, */
  pthread_t t;           /* another thread frees the block meanwhile, */
  if (pthread_create(&t, NULL, free_in_thread, x) != 0 || pthread_join(t, NULL) != 0) return 6;
  *word = seen;          /* (as the owner read it before) */
  free(x);               /* and the owner's free goes on */
  if (single) {
    if (page->free != NULL || list_length(page, page->local_free) != 1) {
      printf("set-up failed: local_free is not the victim alone\n");
      return 5;
    }
    tes_page_collect(page); /* the one-block branch, after the walk's cut */
    size_t on_free = list_length(page, page->free), on_local = list_length(page, page->local_free);
    int twice = list_has(page, page->free, x) + list_has(page, page->local_free, x);
    for (int k = 0; k < rest; k++)
      twice += (list_has(page, page->free, under[k]) + list_has(page, page->local_free, under[k]) != 1);
    printf("collected: %zu on free, %zu on local_free\n", on_free, on_local);
    if (twice != 1 || on_free + on_local != (size_t)rest + 1) {
      printf("after the collect a block is on no list or on two (%d)\n", twice);
      return 1;
    }
  }
  /* The owner's next mallocs of the class take the remote free. */
  static char *again[MAX];
  int hits = 0;
  for (int i = 0; i < MAX; i++) {
    again[i] = malloc(size);
    if (again[i] == NULL) return 2;
    memset(again[i], i & 0xff, size);
    hits += again[i] == x;
  }
  for (int i = 0; i < MAX; i++)
    for (size_t j = 0; j < size; j++)
      if ((unsigned char)again[i][j] != (unsigned char)(i & 0xff)) {
        printf("block %d of %zu bytes overwritten: a block was handed out twice (%d times the one freed twice)\n", i,
               size, hits);
        return 1;
      }
  int back = 0, damaged_back = 0; /* the blocks freed before it: handed out again (once each: the check above) */
  for (int k = 0; k < rest; k++)
    for (int i = 0; i < MAX; i++) {
      back += again[i] == under[k];
      damaged_back += damaged && k == 1 && again[i] == under[k];
    }
  printf("the block freed by both at once was handed out %d time(s), never twice; %d of the %d blocks under it "
         "handed out again\n", hits, back, rest);
  /* The block written after its free stays out (reported); the others,
   * intact, come back (there is no chain for the write to cut since the
   * remote bitmap, twenty-fifth session). */
  if (damaged) return hits <= 1 && damaged_back == 0 && back == rest - 1 ? 0 : 1;
  if (back < rest) printf("blocks lost\n");
  return hits <= 1 && back == rest ? 0 : 1;
}

static int owner_remote_race(size_t size, int count, int victim, int rest, bool damaged) {
  return owner_remote_race_at(size, count, victim, rest, damaged, false);
}

/* Frees blocks[1..count) (arg: blocks, then count as a pointer-sized
 * integer) from this other thread: onto their page's remote stack. */
static void *free_blocks_in_thread(void *arg) {
  void **a = arg;
  char **blocks = a[0];
  for (uintptr_t i = 1; i < (uintptr_t)a[1]; i++) free(blocks[i]);
  return NULL;
}

static size_t list_length(const tes_page_t *page, const tes_block_t *b) {
  size_t n = 0;
  for (; b != NULL && n <= page->capacity; b = tes_block_next(page, b)) n++;
  return n;
}
static bool list_has(const tes_page_t *page, const tes_block_t *b, const void *x) {
  for (size_t n = 0; b != NULL && n <= page->capacity; b = tes_block_next(page, b), n++)
    if ((const void *)b == x) return true;
  return false;
}

/* Remote frees of the page not collected yet: the bits of its bitmap. */
static size_t remote_bits_set(const tes_page_t *page) {
  size_t n = 0;
  for (size_t w = 0; w < (page->capacity + 63) / 64; w++)
    n += (size_t)__builtin_popcountll(atomic_load_explicit(&tes_page_remote_bits(page)[w], memory_order_acquire));
  return n;
}

/* remote_refill_single_local: a page whose free list is empty, whose
 * local_free is one block (the one the last refill held back) and whose
 * remote stack holds REMOTE blocks is collected: free must get the local
 * block and every remote one but the stack's head (freed last, held back
 * in local_free). Before the twentieth session free got the one local
 * block alone (and local_free the remote stack), so the page's next malloc
 * missed again: a producer whose blocks a consumer frees missed every
 * other refill with one block (bench_prodcons: 122,882 misses against the
 * default build's 68,113). */
static int remote_refill_single_local(void) {
  enum { MAX = 4000, REMOTE = 10 };
  static char *blocks[MAX];
  blocks[0] = malloc(48);
  if (blocks[0] == NULL) return 2;
  tes_page_t *page = tes_page_of(tes_segment_of(blocks[0]), blocks[0]);
  int n = 1;
  while (page->free != NULL && n < MAX) { /* the page's free list drained, no miss */
    blocks[n] = malloc(48);
    if (blocks[n] == NULL || tes_page_of(tes_segment_of(blocks[n]), blocks[n]) != page) {
      printf("set-up failed: block %d not from the first block's page\n", n);
      return 5;
    }
    n++;
  }
  if (page->free != NULL || n <= REMOTE || page->local_free != NULL) {
    printf("set-up failed: the page's free list not drained in %d mallocs\n", n);
    return 5;
  }
  free(blocks[0]); /* the owner's free: local_free is this block alone */
  void *arg[2] = {blocks, (void *)(uintptr_t)(REMOTE + 1)};
  pthread_t t;
  if (pthread_create(&t, NULL, free_blocks_in_thread, arg) != 0 || pthread_join(t, NULL) != 0) return 6;
  if (page->free != NULL || list_length(page, page->local_free) != 1 || remote_bits_set(page) != REMOTE) {
    printf("set-up failed: not one local block and %d remote ones\n", REMOTE);
    return 5;
  }
  size_t collected = tes_page_collect(page);
  size_t on_free = list_length(page, page->free), on_local = list_length(page, page->local_free);
  printf("collected %zu remote blocks: %zu on free, %zu on local_free\n", collected, on_free, on_local);
  if (collected != REMOTE || on_free != REMOTE || on_local != 1 || page->local_free != (tes_block_t *)blocks[REMOTE]) {
    printf("expected %d on free (the local block and the remote ones but the last freed), that one on local_free\n",
           REMOTE);
    return 1;
  }
  printf("the refill took the local block and %d remote ones\n", REMOTE - 1);
  return 0;
}

/* A remote free of x by hand, stopped between its summary bit and its
 * block bit: its checks (the tag), its link, its summary bit; then the
 * owner's collect, which takes the summary bit with no block bit under it.
 * *index is x's; false (reported) when the free's checks refuse x. */
static bool free_to_summary_then_collect(tes_page_t *page, char *x, size_t *index) {
  if (!tes_secure_free_quick_any_thread(page, x) || !tes_secure_block_index(page, x, index)) {
    printf("set-up failed: the free's checks\n");
    return false;
  }
  tes_block_set_next(page, (tes_block_t *)x, NULL);
  atomic_fetch_or_explicit(&page->xthread_free, tes_tf_summary_bit(*index / 64), memory_order_relaxed);
  tes_page_collect(page);
  return true;
}

/* remote_bit_after_collect: a freer between its summary bit and its
 * block's bit (tes_free_remote) when the owner collects: the collect takes
 * the summary bit and finds no block bit; the bit comes after. Until it
 * does the page must not look empty (the block is counted live: retired
 * then, the freer's bit would land on a page set up again); once it does,
 * tes_page_take_if_empty must find it (every bitmap word, not only those a
 * summary bit names: no later free into those words need come) and the
 * page empties. */
static void *free_all_but_last(void *arg) {
  char **blocks = arg;
  for (int i = 0; blocks[i + 1] != NULL; i++) free(blocks[i]);
  return NULL;
}
static int remote_bit_after_collect(void) {
  enum { N = 8 };
  static char *blocks[N + 1];
  tes_page_t *page = NULL;
  for (int i = 0; i < N; i++) {
    blocks[i] = malloc(5000); /* a small class of its own, on one page: no other block of this process there */
    tes_page_t *p = blocks[i] != NULL ? tes_page_of(tes_segment_of(blocks[i]), blocks[i]) : NULL;
    if (p == NULL || (page != NULL && p != page)) {
      printf("set-up failed: the blocks are not on one page\n");
      return 5;
    }
    page = p;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, free_all_but_last, blocks) != 0 || pthread_join(t, NULL) != 0) return 6;
  tes_page_collect(page);
  if (tes_page_live(page) != 1) {
    printf("set-up failed: %u live blocks, not 1\n", tes_page_live(page));
    return 5;
  }
  char *x = blocks[N - 1];
  size_t i;
  if (!free_to_summary_then_collect(page, x, &i)) return 5;
  if (tes_page_take_if_empty(page)) {
    printf("the page looked empty before the freer's bit was set\n");
    return 1;
  }
  atomic_fetch_or_explicit(&tes_page_remote_bits(page)[i / 64], (uint64_t)1 << (i % 64), memory_order_release);
  if (!tes_page_take_if_empty(page)) {
    printf("the bit set after the collect was not found: the page never empties\n");
    return 1;
  }
  printf("the late bit was found, the page empty\n");
  return 0;
}

/* remote_bit_queued_sweep (rev25): the same late bit on a page queued
 * behind its class's head, whose owner then allocates other classes only.
 * No summary bit names the bit, and no free into its words can come (the
 * block was the page's last live one): the once-per-purge-delay sweep of
 * the queued pages (heap.c, queues_sweep) is what must find it, as it finds
 * the pages other threads emptied (security.*_remote_emptied_rss). Before
 * rev25 the sweep looked only at pages whose summary field was set: the
 * page stayed, with its segment, until a malloc_trim or the thread's exit. */
static int remote_bit_queued_sweep(void) {
  enum { MAX = 64, BATCH = 2000 };
  static char *blocks[MAX + 1], *remote[MAX + 1];
  static void *batch[BATCH];
  tes_page_t *page = NULL;
  int n = 0; /* blocks[0 .. n - 1] on the first page; blocks[n] on the next one */
  for (; n < MAX; n++) {
    blocks[n] = malloc(5000); /* a small class of its own (as above) */
    if (blocks[n] == NULL) return 2;
    tes_page_t *p = tes_page_of(tes_segment_of(blocks[n]), blocks[n]);
    if (page == NULL) page = p;
    if (p != page) break;
  }
  if (n < 3 || n == MAX) {
    printf("set-up failed: %d blocks on the first page\n", n);
    return 5;
  }
  tes_heap_t *heap = tes_tls_heap;
  unsigned c = page->class_index;
  free(blocks[0]); /* the owner's free: the full page joins its queue, behind the new head */
  for (int i = 1; i < n; i++) remote[i - 1] = blocks[i]; /* the other thread frees all but blocks[n - 1] */
  pthread_t t;
  if (pthread_create(&t, NULL, free_all_but_last, remote) != 0 || pthread_join(t, NULL) != 0) return 6;
  tes_heap_process_delayed(heap); /* the first of them came through the delayed list (the page was full) */
  tes_page_collect(page);
  if (tes_page_live(page) != 1 || page->in_full || heap->queues[c].first == page) {
    printf("set-up failed: %u live blocks, in_full %d, head %d\n", tes_page_live(page), (int)page->in_full,
           heap->queues[c].first == page);
    return 5;
  }
  char *x = blocks[n - 1];
  size_t i;
  if (!free_to_summary_then_collect(page, x, &i)) return 5;
  _Atomic uint64_t *word = &tes_page_remote_bits(page)[i / 64];
  uint64_t bit = (uint64_t)1 << (i % 64);
  atomic_fetch_or_explicit(word, bit, memory_order_release);
  /* The owner moves on to another class: its slow paths run the sweep
   * once per purge delay. Until the bit is taken (the page emptied), at
   * most 5,000 batches a millisecond apart (the delay is 25 ms). */
  int rounds = 0;
  for (; rounds < 5000 && (atomic_load_explicit(word, memory_order_acquire) & bit) != 0; rounds++) {
    for (int k = 0; k < BATCH; k++) batch[k] = malloc(48);
    for (int k = 0; k < BATCH; k++) free(batch[k]);
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  if ((atomic_load_explicit(word, memory_order_acquire) & bit) != 0) {
    printf("the late bit on a queued page was never taken: the page stays (%u live)\n", tes_page_live(page));
    return 1;
  }
  printf("the sweep took the late bit on a queued page (%d batches)\n", rounds);
  return 0;
}

static int medium_bins_only(void) {
  if (sizeof(tes_heap_t) > 12 * 1024) {
    printf("the heap struct takes %zu bytes\n", sizeof(tes_heap_t));
    return 1;
  }
  free(malloc(100)); /* the thread's heap */
  tes_heap_t *heap = tes_tls_heap;
  for (unsigned c = TES_MEDIUM_CLASS_FIRST; c < TES_CLASS_COUNT; c++) {
    size_t size = tes_class_size(c) - TES_PADDING;
    void *a = malloc(size), *b = malloc(size), *keep = malloc(size);
    if (a == NULL || b == NULL || keep == NULL) return 2;
    tes_sbin_t *bin = tes_sbin_of(heap, c);
    uint32_t count = bin->count;
    uint64_t pops = bin->pops;
    free(a);
    free(b);
    if (bin->count != count + 2) {
      printf("class %zu: bin holds %u after two frees, %u before\n", tes_class_size(c), bin->count, count);
      return 1;
    }
    void *d = malloc(size);
    if (bin->pops != pops + 1 || bin->count != count + 1 || (d != a && d != b)) {
      printf("class %zu: the malloc did not take from the bin\n", tes_class_size(c));
      return 1;
    }
    free(d);
    free(keep);
  }
  printf("medium bins: one a medium class\n");
  return 0;
}

/* Every medium class's bin limit: 1 MiB worth of blocks, at least 2, at
 * most TES_SBIN_SLOTS, as the formula heap.c worked out at every flush
 * until the twenty-fifth session (now its compile-time table,
 * bin_limits_table); 0 with TESSERA_BINS off. On a new heap and after a
 * flush (collect), with the option on, off and on again. */
static int sbin_limits_are(tes_heap_t *heap, bool on, const char *where) {
  for (unsigned c = TES_MEDIUM_CLASS_FIRST; c < TES_CLASS_COUNT; c++) {
    size_t n = ((size_t)1024 << 10) / tes_class_size(c);
    uint32_t want = !on ? 0 : n < 2 ? 2 : n > TES_SBIN_SLOTS ? TES_SBIN_SLOTS : (uint32_t)n;
    if (tes_sbin_of(heap, c)->limit != want) {
      printf("%s: class %zu: bin limit %u, want %u\n", where, tes_class_size(c), tes_sbin_of(heap, c)->limit, want);
      return 1;
    }
  }
  return 0;
}

static int sbin_limits(void) {
  free(malloc(100)); /* the thread's heap */
  tes_heap_t *heap = tes_tls_heap;
  if (sbin_limits_are(heap, true, "a new heap")) return 1;
  void *m = malloc(20000);
  free(m);
  tes_collect(false);
  if (sbin_limits_are(heap, true, "after a flush")) return 1;
  if (tes_option_set(TES_OPTION_BINS, 0) != 0) return 2;
  tes_collect(false);
  if (sbin_limits_are(heap, false, "bins off")) return 1;
  if (tes_option_set(TES_OPTION_BINS, 1) != 0) return 2;
  tes_collect(false);
  if (sbin_limits_are(heap, true, "bins on again")) return 1;
  printf("medium bin limits: as the formula, every class\n");
  return 0;
}

/* never_packs (twenty-sixth session, rev26): the hardened build gives
 * every large block a segment of its own, with the guard page after it
 * (large.c packs only in the default build, whose default packs since the
 * twenty-fifth session): TESSERA_LARGE_PACK cannot be set to 1, and blocks
 * of the packing range (above 128 KiB, up to 1 MiB) start their own unit
 * in the segment map, never a host's. */
static int never_packs(void) {
  if (tes_option_set(TES_OPTION_LARGE_PACK, 1) == 0 || tes_option_get(TES_OPTION_LARGE_PACK) != 0) {
    printf("large_pack accepted 1 (now %ld)\n", tes_option_get(TES_OPTION_LARGE_PACK));
    return 1;
  }
  static const size_t sizes[] = {128 * 1024 + 1, 200000, 500000, 1000000, (1 << 20) - 4096};
  void *blocks[5];
  for (int i = 0; i < 5; i++) {
    blocks[i] = malloc(sizes[i]);
    if (blocks[i] == NULL) return 2;
    if (tes_segmap_get(blocks[i]) != TES_UNIT_START) {
      printf("a block of %zu bytes is in a unit marked %u\n", sizes[i], tes_segmap_get(blocks[i]));
      return 1;
    }
  }
  for (int i = 0; i < 5; i++) free(blocks[i]);
  printf("no block packed\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "remote_refill_single_local") == 0) return remote_refill_single_local();
  if (argc == 2 && strcmp(argv[1], "owner_remote_race") == 0) return owner_remote_race(48, 64, 10, 0, false);
  /* _rest: three blocks under the victim on the stack (twentieth session:
   * they were lost). */
  if (argc == 2 && strcmp(argv[1], "owner_remote_race_rest") == 0) return owner_remote_race(48, 64, 10, 3, false);
  /* _single: the same after the page's free list drained (one-block collect). */
  if (argc == 2 && strcmp(argv[1], "owner_remote_race_single") == 0) return owner_remote_race_at(48, 0, 10, 3, false, true);
  if (argc == 2 && strcmp(argv[1], "owner_remote_race_rest_damaged") == 0)
    return owner_remote_race(48, 64, 10, 3, true);
  /* 3,000 B: pages of 21 blocks, the first one full after 200 (bugs.c). */
  if (argc == 2 && strcmp(argv[1], "owner_remote_race_delayed") == 0) return owner_remote_race(3000, 200, 5, 0, false);
  if (argc == 2 && strcmp(argv[1], "free_count_interior_link") == 0) return free_count_interior_link();
  if (argc == 2 && strcmp(argv[1], "medium_bins_only") == 0) return medium_bins_only();
  if (argc == 2 && strcmp(argv[1], "remote_bit_after_collect") == 0) return remote_bit_after_collect();
  if (argc == 2 && strcmp(argv[1], "sbin_limits") == 0) return sbin_limits();
  if (argc == 2 && strcmp(argv[1], "remote_bit_queued_sweep") == 0) return remote_bit_queued_sweep();
  if (argc == 2 && strcmp(argv[1], "large_free_race") == 0) return large_free_race();
  if (argc == 2 && strcmp(argv[1], "large_free_race_late") == 0) return large_free_race_late();
  if (argc == 2 && strcmp(argv[1], "never_packs") == 0) return never_packs();
  fprintf(stderr,
          "usage: %s free_count_interior_link|large_free_race[_late]|owner_remote_race[_rest[_damaged]|_single|_delayed]|"
          "remote_refill_single_local|remote_bit_after_collect|remote_bit_queued_sweep|medium_bins_only|sbin_limits|never_packs\n",
          argv[0]);
  return 2;
}
