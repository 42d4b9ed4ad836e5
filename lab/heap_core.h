/* heap_core: the allocator skeleton every lab policy family is built from.
 *
 * What differs between the textbook allocators is mostly *where free blocks
 * are kept and how one is chosen*; splitting, coalescing, growing the heap,
 * realloc and the heap walk of the checker are the same code. So this header
 * holds that common part once, and each lab/policy_<family>.c file:
 *   1. includes it,
 *   2. defines the free-block index it is about (the five idx_* functions
 *      declared below: nothing, one list, segregated lists, a tree),
 *   3. defines one small wrapper per named policy that calls core_* with a
 *      constant core_cfg_t, so the compiler folds the switches away and every
 *      policy is specialised code without indirect calls.
 * The refinements of the textbook progression (footerless allocated blocks,
 * split threshold, deferred coalescing, growing the heap by only what is
 * missing, in-place realloc, keeping small blocks apart) are the flags of
 * core_cfg_t, so each is one visible step in `tessera lab --compare`.
 *
 * Heap layout (see block_tags.h for the block format):
 *   [pad][block]...[block][epilogue header: size 0, allocated]
 * There is no prologue block: the first block's prev-allocated bit is simply
 * set. The pad makes the first header sit at A - 4 modulo A.
 *
 * Invariants (all verified by core_check):
 *  - blocks tile [core_first, core_epi) exactly; sizes are multiples of the
 *    alignment and at least BLOCK_MIN; payloads are aligned;
 *  - every free block has footer == header (less the prev-allocated bit);
 *    allocated blocks have one too unless cfg.footerless; each header's
 *    prev-allocated bit is true;
 *  - with immediate coalescing no two free blocks are adjacent;
 *  - every free block is in the index exactly once, and only free blocks are;
 *  - a free block is always removed from the index *before* its size or
 *    position changes and inserted again after, because indexes are keyed by
 *    size (and address).
 *
 * State is file-static (one copy per family file); only one policy is active
 * at a time, and init() rebuilds everything on an empty heap.
 *
 * Memory comes only from mem_sbrk (called with an int-sized increment, as in
 * the classic handout): requests stay below 2 GiB and the heap below 4 GiB,
 * so 32-bit sizes and offsets are always enough. */
#ifndef TESSERA_LAB_HEAP_CORE_H
#define TESSERA_LAB_HEAP_CORE_H

#include "block_tags.h"
#include "memlib.h"
#include "policy.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define CORE_INLINE static inline __attribute__((always_inline))

/* Largest request served: keeps every mem_sbrk increment an int, and the heap
 * far below the 4 GiB that 32-bit offsets can address. */
#define CORE_MAX_REQUEST ((size_t)INT_MAX - 64)
#define CORE_MAX_HEAP    ((size_t)UINT32_MAX - 64)

enum core_fit { FIT_FIRST, FIT_NEXT, FIT_BEST };
enum core_order { ORDER_LIFO, ORDER_FIFO, ORDER_ADDR };

typedef struct core_cfg_s {
  unsigned footerless;      /* allocated blocks carry no footer (prev-alloc bit) */
  unsigned deferred;        /* free() does not coalesce; a failed search does */
  unsigned extend_missing;  /* a free last block is extended, not left behind */
  unsigned realloc_inplace; /* shrink in place, grow into neighbours / heap end */
  size_t small_max;         /* >0: requests up to this size are kept apart */
  size_t small_chunk;       /* least heap growth for a small request (see core_malloc) */
  size_t small_chunk_max;   /* most heap growth for one */
  unsigned small_chunk_shift;      /* the chunk is the live small bytes >> this, */
  unsigned small_chunk_heap_shift; /* but at most the heap size >> this */
  size_t split_min;         /* smallest remainder worth splitting off (>= BLOCK_MIN) */
  size_t min_block;         /* smallest block (>= BLOCK_MIN; larger only to show its cost) */
  enum core_fit fit;        /* index-specific: how a block is chosen */
  enum core_order order;    /* index-specific: where a freed block goes */
  unsigned fine_classes;    /* index-specific: segregated class spacing */
} core_cfg_t;

/* Keeping small requests apart from large ones (the -apart policies).
 * "Small" is a request of at most 64 bytes (glibc's fastbin limit on 32-bit
 * machines, the classic lab's setting). A small block is carved from the top
 * of the free block chosen for it, a large one from the bottom, so a free
 * area fills with small blocks from one end and large ones from the other
 * and freed large blocks coalesce instead of being pinned between small
 * ones. When small requests interleave with large ones at the end of the
 * heap (the last growth was for a large request), a small request that fits
 * nowhere grows the heap by a chunk rather than by its own size, so the
 * separation also holds for fresh memory. The chunk is half the bytes of live
 * small blocks (it grows with them), between 256 bytes and 16 KiB, and never
 * more than 1/16 of the heap, so small heaps pay little for it. Measured on
 * both trace sets (docs/LAB.md): a bigger chunk helps the binary traces and
 * costs the small 64-bit heaps; these values balance the two. */
#define SMALL_APART_CFG                                                        \
  .small_max = 64, .small_chunk = 256, .small_chunk_max = 16384,                \
  .small_chunk_shift = 1, .small_chunk_heap_shift = 4

static char *core_base;   /* offsets are taken from here; offset 0 is "none" */
static char *core_first;  /* first block (== core_epi while the heap is empty) */
static char *core_epi;    /* the epilogue header: last word of the heap */
static size_t core_align; /* 8 or 16 */
static size_t core_small_live; /* bytes in live small blocks (cfg.small_max only) */
static int core_grew_small;    /* the last heap growth in malloc was for a small request */
static int core_unmerged;      /* deferred: blocks were freed since the last full merge */

CORE_INLINE tag_t core_off(char *b) { return (tag_t)(b - core_base); }
CORE_INLINE char *core_ptr(tag_t off) { return off ? core_base + off : NULL; }

/* The free-block index, defined by the family file that includes this. */
static void idx_init(core_cfg_t cfg);
CORE_INLINE void idx_insert(core_cfg_t cfg, char *b);
CORE_INLINE void idx_remove(core_cfg_t cfg, char *b);
CORE_INLINE char *idx_find(core_cfg_t cfg, size_t asize);
/* Walk the index, validate each member with core_check_member(), and count
 * them; returns 0, or -1 with err filled. */
static int idx_check(core_cfg_t cfg, char *err, size_t errlen, size_t *count);

CORE_INLINE size_t core_overhead(core_cfg_t cfg) {
  return cfg.footerless ? TAG_WORD : 2 * TAG_WORD;
}

CORE_INLINE size_t core_min_block(core_cfg_t cfg) {
  return cfg.min_block > BLOCK_MIN ? cfg.min_block : BLOCK_MIN;
}

/* Block size for a request: payload plus tags, aligned, at least the
 * minimal block. */
CORE_INLINE size_t core_asize(core_cfg_t cfg, size_t size) {
  size_t a = (size + core_overhead(cfg) + core_align - 1) & ~(core_align - 1);
  return a < core_min_block(cfg) ? core_min_block(cfg) : a;
}

/* Small-block accounting (cfg.small_max): a block counts as small when its
 * size is at most the block size of the largest small request. Counting by
 * block size, at allocation and at free alike, keeps the total exact. */
CORE_INLINE void core_small_account(core_cfg_t cfg, size_t block_size, int sign) {
  if (!cfg.small_max || block_size > core_asize(cfg, cfg.small_max)) return;
  if (sign > 0) core_small_live += block_size;
  else core_small_live -= block_size;
}

CORE_INLINE size_t core_split_min(core_cfg_t cfg) {
  return cfg.split_min > core_min_block(cfg) ? cfg.split_min : core_min_block(cfg);
}

static int core_init(core_cfg_t cfg, size_t align) {
  if (align != 8 && align != 16) {
    errno = EINVAL;
    return -1;
  }
  core_align = align;
  char *brk = (char *)mem_heap_hi() + 1;
  size_t pad = (size_t)(-(uintptr_t)(brk + TAG_WORD)) & (align - 1);
  char *p = mem_sbrk((int)(pad + TAG_WORD));
  if (p == (void *)-1) {
    errno = ENOMEM;
    return -1;
  }
  /* Offsets start below the heap so that no block has offset 0. */
  core_base = (char *)mem_heap_lo() - 16;
  core_first = core_epi = p + pad;
  core_small_live = 0;
  core_grew_small = 0;
  core_unmerged = 0;
  *tag_at(core_epi) = TAG_ALLOC | TAG_PREV_ALLOC;
  idx_init(cfg);
  return 0;
}

/* Grow the heap so that a free block of exactly asize bytes ends it, and
 * return that block (not in the index, header and footer written). With
 * extend_missing a free last block is reused and only the difference is
 * asked from mem_sbrk. NULL (errno = ENOMEM) when mem_sbrk refuses; the heap
 * is then unchanged. */
static char *core_extend(core_cfg_t cfg, size_t asize) {
  char *b = core_epi;
  size_t have = 0;
  int merge_last = cfg.extend_missing && !tag_prev_alloc(core_epi);
  if (merge_last) {
    b = tag_prev(core_epi);
    have = tag_size(b);
  }
  size_t need = asize > have ? asize - have : 0;
  if (need) {
    size_t used = (size_t)(core_epi + TAG_WORD - core_base);
    if (need > CORE_MAX_REQUEST || used + need > CORE_MAX_HEAP ||
        mem_sbrk((int)need) == (void *)-1) {
      errno = ENOMEM;
      return NULL;
    }
  }
  if (merge_last) idx_remove(cfg, b);
  size_t size = have + need;
  tag_set(b, size, 0);
  tag_set_footer(b);
  core_epi = b + size;
  *tag_at(core_epi) = TAG_ALLOC; /* epilogue; the block before it is free */
  return b;
}

/* Merge the free block b (not in the index, next's prev-alloc bit clear) with
 * its free neighbours and put the result in the index. */
CORE_INLINE char *core_coalesce(core_cfg_t cfg, char *b) {
  size_t size = tag_size(b);
  char *next = b + size;
  if (!tag_is_alloc(next)) {
    idx_remove(cfg, next);
    size += tag_size(next);
  }
  if (!tag_prev_alloc(b)) {
    char *prev = tag_prev(b);
    idx_remove(cfg, prev);
    size += tag_size(prev);
    b = prev;
  }
  tag_set(b, size, 0);
  tag_set_footer(b);
  idx_insert(cfg, b);
  return b;
}

/* Deferred coalescing: one pass over the heap merging every run of free
 * blocks. Called when a search fails, before the heap is grown. */
static void core_coalesce_all(core_cfg_t cfg) {
  for (char *b = core_first; b != core_epi; b = tag_next(b)) {
    if (tag_is_alloc(b)) continue;
    char *n = tag_next(b);
    if (tag_is_alloc(n)) continue;
    idx_remove(cfg, b);
    size_t size = tag_size(b);
    while (!tag_is_alloc(n)) {
      idx_remove(cfg, n);
      size += tag_size(n);
      n += tag_size(n);
    }
    tag_set(b, size, 0);
    tag_set_footer(b);
    idx_insert(cfg, b);
  }
}

/* Mark the allocated block b (whose header already has its size) allocated:
 * footer if the policy keeps one, and tell the next block. */
CORE_INLINE void core_mark_alloc(core_cfg_t cfg, char *b, size_t size) {
  tag_set(b, size, TAG_ALLOC);
  if (!cfg.footerless) tag_set_footer(b);
  tag_set_prev_alloc(b + size, 1);
}

/* Allocate asize bytes out of the free block b (already out of the index),
 * splitting off the rest when it is at least the split threshold. high puts
 * the allocation at the top of b (small blocks, kept apart from large ones
 * that are placed at the bottom). Returns the allocated block. */
CORE_INLINE char *core_place(core_cfg_t cfg, char *b, size_t asize, int high) {
  size_t size = tag_size(b), rest = size - asize;
  if (rest < core_split_min(cfg)) {
    core_mark_alloc(cfg, b, size);
    return b;
  }
  if (high) {
    tag_set(b, rest, 0);
    tag_set_footer(b);
    idx_insert(cfg, b);
    char *a = b + rest;
    *tag_at(a) = (tag_t)asize; /* previous block (the rest) is free */
    core_mark_alloc(cfg, a, asize);
    return a;
  }
  tag_set(b, asize, TAG_ALLOC);
  if (!cfg.footerless) tag_set_footer(b);
  char *r = b + asize;
  *tag_at(r) = (tag_t)rest | TAG_PREV_ALLOC;
  tag_set_footer(r); /* the block after r already has prev-alloc clear */
  idx_insert(cfg, r);
  return b;
}

CORE_INLINE void *core_malloc(core_cfg_t cfg, size_t size) {
  if (size == 0) return NULL;
  if (size > CORE_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  size_t asize = core_asize(cfg, size);
  int small = cfg.small_max && size <= cfg.small_max;
  char *b = idx_find(cfg, asize);
  if (!b && cfg.deferred && core_unmerged) {
    /* Only worth a pass when something was freed since the last one: a
     * run of heap growths would otherwise walk the whole heap each time. */
    core_coalesce_all(cfg);
    core_unmerged = 0;
    b = idx_find(cfg, asize);
  }
  if (b) {
    idx_remove(cfg, b);
  } else {
    b = NULL;
    if (small && !core_grew_small) {
      /* Small requests interleave with large ones at the heap end: grow
       * by a chunk that later small requests fill from the top and large
       * ones from the bottom (see SMALL_APART_CFG). While only small
       * requests grow the heap, it grows by exactly what they need. */
      size_t chunk = core_small_live >> cfg.small_chunk_shift;
      if (chunk < cfg.small_chunk) chunk = cfg.small_chunk;
      if (chunk > cfg.small_chunk_max) chunk = cfg.small_chunk_max;
      if (chunk > (mem_heapsize() >> cfg.small_chunk_heap_shift))
        chunk = mem_heapsize() >> cfg.small_chunk_heap_shift;
      chunk &= ~(core_align - 1);
      if (chunk > asize) b = core_extend(cfg, chunk);
    }
    if (!b) b = core_extend(cfg, asize);
    core_grew_small = small;
    if (!b) return NULL;
  }
  b = core_place(cfg, b, asize, small);
  core_small_account(cfg, tag_size(b), +1);
  return tag_payload(b);
}

CORE_INLINE void core_free(core_cfg_t cfg, void *p) {
  if (!p) return;
  char *b = tag_block_of(p);
  core_small_account(cfg, tag_size(b), -1);
  tag_set(b, tag_size(b), 0);
  tag_set_footer(b);
  tag_set_prev_alloc(tag_next(b), 0);
  if (cfg.deferred) {
    idx_insert(cfg, b);
    core_unmerged = 1;
  } else {
    core_coalesce(cfg, b);
  }
}

/* Cut the allocated block b down to asize, freeing the tail if it is worth it. */
static void core_shrink(core_cfg_t cfg, char *b, size_t asize) {
  size_t size = tag_size(b), rest = size - asize;
  if (rest < core_split_min(cfg)) return;
  tag_set(b, asize, TAG_ALLOC);
  if (!cfg.footerless) tag_set_footer(b);
  char *r = b + asize;
  *tag_at(r) = (tag_t)rest | TAG_PREV_ALLOC;
  tag_set_footer(r);
  tag_set_prev_alloc(r + rest, 0);
  if (cfg.deferred) {
    idx_insert(cfg, r);
    core_unmerged = 1;
  } else {
    core_coalesce(cfg, r);
  }
}

/* In-place realloc, cheapest first: shrink; grow into a free next block;
 * grow at the end of the heap by asking only for what is missing; slide down
 * into a free previous block. Returns the new payload or NULL to move. */
static void *core_realloc_inplace(core_cfg_t cfg, char *b, size_t asize) {
  size_t cur = tag_size(b);
  if (asize <= cur) {
    core_shrink(cfg, b, asize);
    return tag_payload(b);
  }
  char *n = b + cur;
  size_t nsize = tag_is_alloc(n) ? 0 : tag_size(n);
  if (cur + nsize >= asize) {
    idx_remove(cfg, n);
    core_mark_alloc(cfg, b, cur + nsize);
    core_shrink(cfg, b, asize);
    return tag_payload(b);
  }
  if (n == core_epi || (nsize && cfg.extend_missing && n + nsize == core_epi)) {
    char *e = core_extend(cfg, asize - cur); /* starts at n */
    if (e) {
      core_mark_alloc(cfg, b, asize);
      return tag_payload(b);
    }
  }
  if (!tag_prev_alloc(b)) {
    char *prev = tag_prev(b);
    size_t total = tag_size(prev) + cur + nsize;
    if (total >= asize) {
      idx_remove(cfg, prev);
      if (nsize) idx_remove(cfg, n);
      memmove(tag_payload(prev), tag_payload(b), cur - core_overhead(cfg));
      core_mark_alloc(cfg, prev, total);
      core_shrink(cfg, prev, asize);
      return tag_payload(prev);
    }
  }
  return NULL;
}

static void *core_realloc(core_cfg_t cfg, void *p, size_t size) {
  if (!p) return core_malloc(cfg, size);
  if (size == 0) {
    core_free(cfg, p);
    return NULL;
  }
  if (size > CORE_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  char *b = tag_block_of(p);
  size_t keep = tag_size(b) - core_overhead(cfg);
  if (keep > size) keep = size;
  if (cfg.realloc_inplace) {
    size_t old_size = tag_size(b);
    void *q = core_realloc_inplace(cfg, b, core_asize(cfg, size));
    if (q) {
      core_small_account(cfg, old_size, -1);
      core_small_account(cfg, tag_size(tag_block_of(q)), +1);
      return q;
    }
  }
  void *q = core_malloc(cfg, size);
  if (!q) return NULL;
  memcpy(q, p, keep);
  core_free(cfg, p);
  return q;
}

/* ---- doubly linked free lists (explicit and segregated families) -------- */

/* A list of free blocks linked through their link words: link0 = next,
 * link1 = prev, as offsets from core_base. The tail makes FIFO insertion
 * O(1). */
typedef struct core_list_s {
  tag_t head, tail;
} core_list_t;

#define LIST_NEXT(b) (*tag_link0(b))
#define LIST_PREV(b) (*tag_link1(b))

CORE_INLINE void list_link_between(core_list_t *l, char *b, char *prev, char *next) {
  LIST_PREV(b) = prev ? core_off(prev) : 0;
  LIST_NEXT(b) = next ? core_off(next) : 0;
  if (prev) LIST_NEXT(prev) = core_off(b);
  else l->head = core_off(b);
  if (next) LIST_PREV(next) = core_off(b);
  else l->tail = core_off(b);
}

CORE_INLINE void list_push_front(core_list_t *l, char *b) {
  list_link_between(l, b, NULL, core_ptr(l->head));
}

CORE_INLINE void list_push_back(core_list_t *l, char *b) {
  list_link_between(l, b, core_ptr(l->tail), NULL);
}

/* Address order: O(length) insertion, but first fit then behaves like best
 * fit on many workloads and neighbours in the list are neighbours in memory. */
CORE_INLINE void list_insert_addr(core_list_t *l, char *b) {
  char *prev = NULL, *next = core_ptr(l->head);
  while (next && next < b) {
    prev = next;
    next = core_ptr(LIST_NEXT(next));
  }
  list_link_between(l, b, prev, next);
}

CORE_INLINE void list_insert(core_list_t *l, char *b, enum core_order order) {
  if (order == ORDER_LIFO) list_push_front(l, b);
  else if (order == ORDER_FIFO) list_push_back(l, b);
  else list_insert_addr(l, b);
}

CORE_INLINE void list_remove(core_list_t *l, char *b) {
  char *prev = core_ptr(LIST_PREV(b)), *next = core_ptr(LIST_NEXT(b));
  if (prev) LIST_NEXT(prev) = LIST_NEXT(b);
  else l->head = LIST_NEXT(b);
  if (next) LIST_PREV(next) = LIST_PREV(b);
  else l->tail = LIST_PREV(b);
}

/* First block of the list that fits, or with best the smallest that fits
 * (stopping at an exact fit). */
CORE_INLINE char *list_find(core_list_t *l, size_t asize, int best) {
  char *found = NULL;
  size_t found_size = SIZE_MAX;
  for (char *b = core_ptr(l->head); b; b = core_ptr(LIST_NEXT(b))) {
    size_t size = tag_size(b);
    if (size < asize || size >= found_size) continue;
    if (!best || size == asize) return b;
    found = b;
    found_size = size;
  }
  return found;
}

/* ---- checking ---------------------------------------------------------- */

#define CORE_FAIL(...)                    \
  do {                                    \
    snprintf(err, errlen, __VA_ARGS__);   \
    return -1;                            \
  } while (0)

CORE_INLINE size_t core_heap_off(const char *b) { return (size_t)(b - (char *)mem_heap_lo()); }

/* Validate one index member and mark it; called by idx_check. */
__attribute__((unused)) static int core_check_member(char *b, const char *where, char *err,
                                                     size_t errlen) {
  if (b < core_first || b + BLOCK_MIN > core_epi)
    CORE_FAIL("%s: member at heap offset %td is outside the heap", where,
              b - (char *)mem_heap_lo());
  if (((uintptr_t)b + TAG_WORD) & (core_align - 1))
    CORE_FAIL("%s: member at offset %zu is not a block start (misaligned)", where,
              core_heap_off(b));
  tag_t h = tag_hdr(b);
  if (h & TAG_ALLOC)
    CORE_FAIL("%s: allocated block at offset %zu is in a free list", where, core_heap_off(b));
  if (h & TAG_MARK)
    CORE_FAIL("%s: free block at offset %zu is listed twice", where, core_heap_off(b));
  size_t size = h & ~TAG_FLAGS;
  if (size < BLOCK_MIN || b + size > core_epi ||
      *tag_at(b + size - TAG_WORD) != (h & ~TAG_PREV_ALLOC))
    CORE_FAIL("%s: member at offset %zu is not a valid free block", where, core_heap_off(b));
  *tag_at(b) = h | TAG_MARK;
  return 0;
}

/* Check one list: members valid and marked (core_check_member), prev links
 * mirror next links, the tail is the last member, order kept when ordered,
 * and accept(b) true for every member (the right size class). */
__attribute__((unused)) static int core_check_list(core_list_t *l, const char *where,
                                                   enum core_order order,
                                                   int (*accept)(char *b, void *ctx), void *ctx,
                                                   char *err, size_t errlen, size_t *count) {
  char *prev = NULL;
  for (char *b = core_ptr(l->head); b; prev = b, b = core_ptr(LIST_NEXT(b))) {
    if (core_check_member(b, where, err, errlen) != 0) return -1;
    if (core_ptr(LIST_PREV(b)) != prev)
      CORE_FAIL("%s: block at offset %zu has a prev link that does not point back", where,
                core_heap_off(b));
    if (order == ORDER_ADDR && prev && prev >= b)
      CORE_FAIL("%s: block at offset %zu breaks address order", where, core_heap_off(b));
    if (accept && !accept(b, ctx))
      CORE_FAIL("%s: block at offset %zu (size %zu) is in the wrong list", where,
                core_heap_off(b), tag_size(b));
    (*count)++;
  }
  if (core_ptr(l->tail) != prev)
    CORE_FAIL("%s: tail does not point at the last member", where);
  return 0;
}

/* Clear the marks idx_check left; report the first free block it missed. */
static int core_check_marks(char *err, size_t errlen, int report) {
  int bad = 0;
  for (char *b = core_first; b != core_epi; b = tag_next(b)) {
    tag_t h = tag_hdr(b);
    if (!(h & TAG_ALLOC) && !(h & TAG_MARK) && report && !bad) {
      snprintf(err, errlen, "free block at offset %zu (size %zu) is in no free list",
               core_heap_off(b), (size_t)(h & ~TAG_FLAGS));
      bad = 1;
    }
    *tag_at(b) = h & ~TAG_MARK;
  }
  return bad ? -1 : 0;
}

static int core_check(core_cfg_t cfg, int has_index, char *err, size_t errlen) {
  char *hi = (char *)mem_heap_hi() + 1;
  if (core_epi + TAG_WORD != hi)
    CORE_FAIL("epilogue at offset %zu is not the last word of the heap (size %zu)",
              core_heap_off(core_epi), mem_heapsize());
  if (((uintptr_t)core_first + TAG_WORD) & (core_align - 1))
    CORE_FAIL("first block at offset %zu is misaligned", core_heap_off(core_first));
  int prev_alloc = 1;
  size_t nfree = 0;
  char *b = core_first;
  for (; b != core_epi; b = tag_next(b)) {
    if (b < core_first || b + TAG_WORD > core_epi)
      CORE_FAIL("block walk left the heap at offset %td", b - (char *)mem_heap_lo());
    tag_t h = tag_hdr(b);
    size_t size = h & ~TAG_FLAGS;
    int alloc = (h & TAG_ALLOC) != 0;
    if (h & TAG_MARK) CORE_FAIL("block at offset %zu has a stray mark bit", core_heap_off(b));
    if (size < BLOCK_MIN || size % core_align)
      CORE_FAIL("block at offset %zu has bad size %zu", core_heap_off(b), size);
    if (b + size > core_epi)
      CORE_FAIL("block at offset %zu (size %zu) runs past the heap end", core_heap_off(b), size);
    if ((uintptr_t)tag_payload(b) & (core_align - 1))
      CORE_FAIL("payload at offset %zu is not %zu-aligned", core_heap_off(b) + TAG_WORD,
                core_align);
    if (((h & TAG_PREV_ALLOC) != 0) != prev_alloc)
      CORE_FAIL("block at offset %zu: prev-allocated bit says %d, previous block is %s",
                core_heap_off(b), (h & TAG_PREV_ALLOC) != 0, prev_alloc ? "allocated" : "free");
    if ((!alloc || !cfg.footerless) && *tag_at(b + size - TAG_WORD) != (h & ~TAG_PREV_ALLOC))
      CORE_FAIL("block at offset %zu: footer %#x disagrees with header %#x", core_heap_off(b),
                (unsigned)*tag_at(b + size - TAG_WORD), (unsigned)h);
    if (!alloc) {
      if (!prev_alloc && !cfg.deferred)
        CORE_FAIL("free blocks at offset %zu and before it are not coalesced",
                  core_heap_off(b));
      nfree++;
    }
    prev_alloc = alloc;
  }
  tag_t eh = tag_hdr(core_epi);
  if ((eh & ~TAG_FLAGS) != 0 || !(eh & TAG_ALLOC))
    CORE_FAIL("epilogue header %#x is not a zero-size allocated block", (unsigned)eh);
  if (((eh & TAG_PREV_ALLOC) != 0) != prev_alloc)
    CORE_FAIL("epilogue prev-allocated bit disagrees with the last block");
  if (!has_index) return 0;
  size_t listed = 0;
  int rc = idx_check(cfg, err, errlen, &listed);
  if (core_check_marks(err, errlen, rc == 0) != 0) rc = -1;
  if (rc != 0) return -1;
  if (listed != nfree)
    CORE_FAIL("free lists hold %zu blocks but the heap has %zu free blocks", listed, nfree);
  return 0;
}

/* ---- declaring a policy --------------------------------------------------- */

__attribute__((unused)) static int core_check_indexed(core_cfg_t cfg, char *err,
                                                      size_t errlen) {
  return core_check(cfg, 1, err, errlen);
}

/* Define the lab_policy_t `ident` for one constant configuration (the
 * designated initialisers after `checker`). The wrappers are where the
 * compiler specialises the core for it. `checker` is core_check_indexed or
 * a family's own. Family files wrap this in FAMILY_POLICY(ident, "name", ...)
 * macros, one policy per line, which lab/handout/make_mm.sh looks up. */
#define CORE_DEFINE_POLICY(ident, pname, desc, checker, ...)                      \
  static const core_cfg_t ident##_cfg = {__VA_ARGS__};                          \
  static int ident##_init(size_t a) { return core_init(ident##_cfg, a); }        \
  static void *ident##_malloc(size_t n) { return core_malloc(ident##_cfg, n); }  \
  static void ident##_free(void *p) { core_free(ident##_cfg, p); }               \
  static void *ident##_realloc(void *p, size_t n) {                             \
    return core_realloc(ident##_cfg, p, n);                                      \
  }                                                                              \
  static int ident##_check(char *e, size_t l) { return checker(ident##_cfg, e, l); } \
  const lab_policy_t ident = {pname,          desc,          ident##_init,       \
                              ident##_malloc, ident##_free,  ident##_realloc,    \
                              ident##_check};


#endif
