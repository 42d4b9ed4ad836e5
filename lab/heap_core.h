/* heap_core: the allocator skeleton every lab policy family is built from.
 *
 * What differs between the textbook allocators is mostly *where free blocks
 * are kept and how one is chosen*; splitting, coalescing, growing the heap,
 * realloc and the heap walk of the checker are the same code. So this header
 * holds that common part once, and each lab/policy_<family>.c file:
 *   1. includes it,
 *   2. defines the free-block index it is about (the five idx_* functions
 *      declared below: nothing, one list, segregated lists, a tree), keeping
 *      one copy of its state per block width (indexed by cfg.wide),
 *   3. defines one small wrapper per named policy that calls core_* with a
 *      constant core_cfg_t, so the compiler folds the switches away and every
 *      policy is specialised code without indirect calls.
 * The refinements of the textbook progression (footerless allocated blocks,
 * split threshold, deferred coalescing, growing the heap by only what is
 * missing, in-place realloc, keeping small blocks apart) are the flags of
 * core_cfg_t, so each is one visible step in `tessera lab --compare`.
 *
 * One heap, two regions. The block format has two widths (block_tags.h):
 * narrow (4-byte tags, 32-bit sizes and offsets: cheap tiny blocks, but
 * blocks below 2 GiB and regions below 4 GiB) and wide (8-byte tags, 64-bit
 * sizes and offsets). cfg.wide is one more constant of core_cfg_t: every
 * policy is compiled in both widths, and the core_*_any functions at the end
 * of this file are the policy. A heap starts narrow. The first growth the
 * narrow format cannot describe (a block above its limit, or a region past
 * it) marks the narrow region full and opens a wide region at the current
 * break; from then on every growth is wide. A live heap cannot be re-laid
 * (payloads must not move, and a wider header would overlap the previous
 * block), so the narrow region stays as it is: its blocks live until freed,
 * free() and realloc find a block's region by its address, and its free
 * blocks keep serving every request they can hold before the wide region is
 * searched or grown. No rule looks at a trace: only at what each format can
 * describe. Heaps that never need it never open the wide region, so the
 * narrow path pays one predictable branch per call.
 *
 * Region layout (see block_tags.h for the block format):
 *   [pad][block]...[block][epilogue header: size 0, allocated]
 * There is no prologue block: the first block's prev-allocated bit is simply
 * set. The pad makes the first header sit at A - word modulo A. The narrow
 * region starts at the heap start; the wide one, when open, right after the
 * narrow region's epilogue, and ends the heap.
 *
 * Invariants (all verified by core_check, per region):
 *  - blocks tile [first, epi) exactly; sizes are multiples of the alignment
 *    and at least the width's minimal block; payloads are aligned;
 *  - every free block has footer == header (less the prev-allocated bit);
 *    allocated blocks have one too unless cfg.footerless; each header's
 *    prev-allocated bit is true;
 *  - with immediate coalescing no two free blocks are adjacent;
 *  - every free block is in its region's index exactly once, and only free
 *    blocks are;
 *  - a free block is always removed from the index *before* its size or
 *    position changes and inserted again after, because indexes are keyed by
 *    size (and address);
 *  - the narrow region's epilogue is the last word before the wide region,
 *    or of the heap; the wide region's is the last word of the heap.
 *
 * State is file-static (one copy per family file); only one policy is active
 * at a time, and init() rebuilds everything on an empty heap.
 *
 * Memory comes only from mem_sbrk, always with an int-sized increment, as in
 * the classic handout: a wide growth beyond that is asked in pieces. If a
 * later piece is refused, what was obtained becomes a free block at the end
 * of the heap (consistent, reusable) and the request fails with ENOMEM. */
#ifndef TESSERA_LAB_HEAP_CORE_H
#define TESSERA_LAB_HEAP_CORE_H

#include "block_tags.h"
#include "memlib.h"
#include "policy.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CORE_INLINE static inline __attribute__((always_inline))

/* What the narrow format describes: a block whose growth fits one int-sized
 * mem_sbrk, in a region far below the 4 GiB that 32-bit offsets address. */
#define CORE_NARROW_MAX_REQUEST ((size_t)INT_MAX - 64)
#define CORE_NARROW_MAX_REGION  ((size_t)UINT32_MAX - 64)
/* The wide format: far beyond any heap (the trace reader stops at 2^48), and
 * small enough that size + tags + alignment never overflows. With a 32-bit
 * size_t (the classic handout builds with -m32) 1 << 56 folded to 0 and no
 * wide request could ever succeed: after one request above the narrow
 * format's, the heap could not grow again. */
#if SIZE_MAX > UINT32_MAX
#define CORE_WIDE_MAX_REQUEST   ((size_t)1 << 56)
#else
#define CORE_WIDE_MAX_REQUEST   ((size_t)SIZE_MAX - 4096)
#endif
_Static_assert(CORE_WIDE_MAX_REQUEST > CORE_NARROW_MAX_REQUEST, "the wide format serves what the narrow one cannot");
/* Largest single mem_sbrk increment (an int, a multiple of any alignment). */
#define CORE_SBRK_PIECE         ((size_t)INT_MAX & ~(size_t)63)

enum core_fit { FIT_FIRST, FIT_NEXT, FIT_BEST };
enum core_order { ORDER_LIFO, ORDER_FIFO, ORDER_ADDR };

typedef struct core_cfg_s {
  unsigned wide;            /* block width of the region this code runs on (0/1) */
  unsigned footerless;      /* allocated blocks carry no footer (prev-alloc bit) */
  unsigned deferred;        /* free() does not coalesce; a failed search does */
  unsigned extend_missing;  /* a free last block is extended, not left behind */
  unsigned realloc_inplace; /* shrink in place, grow into neighbours / heap end */
  size_t small_max;         /* >0: requests up to this size are kept apart */
  size_t small_chunk;       /* least heap growth for a small request (see core_malloc) */
  size_t small_chunk_max;   /* most heap growth for one */
  unsigned small_chunk_shift;      /* the chunk is the live small bytes >> this, */
  unsigned small_chunk_heap_shift; /* but at most the heap size >> this */
  size_t split_min;         /* smallest remainder worth splitting off (>= minimal block) */
  size_t min_block;         /* smallest block (>= the width's; larger only to show its cost) */
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

/* One region of the heap: [0] narrow, [1] wide. */
typedef struct core_region_s {
  char *lo;          /* first byte of the region; NULL while (wide) not open */
  char *base;        /* offsets are taken from here; offset 0 is "none" */
  char *first;       /* first block (== epi while the region is empty) */
  char *epi;         /* the epilogue header: last word of the region */
  size_t small_live; /* bytes in live small blocks (cfg.small_max only) */
  int grew_small;    /* the last growth in malloc was for a small request */
  int unmerged;      /* deferred: blocks were freed since the last full merge */
  int full;          /* may not grow: the format's limit was reached, or
                        (narrow) the wide region lies above it */
} core_region_t;

static core_region_t core_rg[2];
static size_t core_align; /* 8 or 16 */

CORE_INLINE core_region_t *core_region(core_cfg_t cfg) { return &core_rg[cfg.wide ? 1 : 0]; }
CORE_INLINE size_t core_word(core_cfg_t cfg) { return tag_word((int)cfg.wide); }

CORE_INLINE tag_t core_off(core_cfg_t cfg, char *b) {
  return (tag_t)(b - core_region(cfg)->base);
}
CORE_INLINE char *core_ptr(core_cfg_t cfg, tag_t off) {
  return off ? core_region(cfg)->base + off : NULL;
}

/* The free-block index, defined by the family file that includes this; each
 * keeps one copy of its state per width (cfg.wide). */
static void idx_init(core_cfg_t cfg);
CORE_INLINE void idx_insert(core_cfg_t cfg, char *b);
CORE_INLINE void idx_remove(core_cfg_t cfg, char *b);
CORE_INLINE char *idx_find(core_cfg_t cfg, size_t asize);
/* Walk the index, validate each member with core_check_member(), and count
 * them; returns 0, or -1 with err filled. */
static int idx_check(core_cfg_t cfg, char *err, size_t errlen, size_t *count);

CORE_INLINE size_t core_max_request(core_cfg_t cfg) {
  return cfg.wide ? CORE_WIDE_MAX_REQUEST : CORE_NARROW_MAX_REQUEST;
}

CORE_INLINE size_t core_overhead(core_cfg_t cfg) {
  return cfg.footerless ? core_word(cfg) : 2 * core_word(cfg);
}

CORE_INLINE size_t core_min_block(core_cfg_t cfg) {
  size_t m = tag_block_min((int)cfg.wide);
  return cfg.min_block > m ? cfg.min_block : m;
}

/* Block size for a request (at most core_max_request): payload plus tags,
 * aligned, at least the minimal block. */
CORE_INLINE size_t core_asize(core_cfg_t cfg, size_t size) {
  size_t a = (size + core_overhead(cfg) + core_align - 1) & ~(core_align - 1);
  return a < core_min_block(cfg) ? core_min_block(cfg) : a;
}

/* Small-block accounting (cfg.small_max): a block counts as small when its
 * size is at most the block size of the largest small request. Counting by
 * block size, at allocation and at free alike, keeps the total exact. */
CORE_INLINE void core_small_account(core_cfg_t cfg, size_t block_size, int sign) {
  if (!cfg.small_max || block_size > core_asize(cfg, cfg.small_max)) return;
  if (sign > 0) core_region(cfg)->small_live += block_size;
  else core_region(cfg)->small_live -= block_size;
}

CORE_INLINE size_t core_split_min(core_cfg_t cfg) {
  return cfg.split_min > core_min_block(cfg) ? cfg.split_min : core_min_block(cfg);
}

/* Start an empty region of cfg's width at the current break: the pad and
 * the epilogue. Returns 0, or -1 (errno = ENOMEM) with nothing changed. */
static int core_region_open(core_cfg_t cfg) {
  core_region_t *rg = core_region(cfg);
  size_t word = core_word(cfg);
  char *brk = (char *)mem_heap_hi() + 1;
  size_t pad = (size_t)(-(uintptr_t)(brk + word)) & (core_align - 1);
  char *p = mem_sbrk((int)(pad + word));
  if (p == (void *)-1) {
    errno = ENOMEM;
    return -1;
  }
  memset(rg, 0, sizeof *rg);
  rg->lo = p;
  /* Offsets start below the region so that no block has offset 0. */
  rg->base = p - 16;
  rg->first = rg->epi = p + pad;
  tag_put((int)cfg.wide, rg->epi, 0, TAG_ALLOC | TAG_PREV_ALLOC);
  idx_init(cfg);
  return 0;
}

/* init() of every policy: an empty narrow region, no wide one. */
static int core_init(core_cfg_t cfg, size_t align) {
  if (align != 8 && align != 16) {
    errno = EINVAL;
    return -1;
  }
  core_align = align;
  memset(core_rg, 0, sizeof core_rg);
  return core_region_open(cfg);
}

/* Grow the break by need bytes in int-sized pieces; returns the bytes
 * obtained (need, or less when mem_sbrk refused a piece). */
static size_t core_sbrk(size_t need) {
  size_t got = 0;
  while (got < need) {
    size_t piece = need - got < CORE_SBRK_PIECE ? need - got : CORE_SBRK_PIECE;
    if (mem_sbrk((int)piece) == (void *)-1) break;
    got += piece;
  }
  return got;
}

CORE_INLINE char *core_coalesce(core_cfg_t cfg, char *b);

/* A growth that got only part of its bytes: they become a free block at the
 * end of the region (merged with a free last block), so the heap stays
 * consistent and the bytes reusable. */
static void core_keep_partial(core_cfg_t cfg, size_t got) {
  int w = (int)cfg.wide;
  core_region_t *rg = core_region(cfg);
  char *b = rg->epi;
  tag_set(w, b, got, 0);
  tag_set_footer(w, b);
  rg->epi = b + got;
  tag_put(w, rg->epi, 0, TAG_ALLOC); /* epilogue; the block before it is free */
  core_coalesce(cfg, b);
}

/* Grow the region so that a free block of exactly asize bytes ends it, and
 * return that block (not in the index, header and footer written). With
 * extend_missing a free last block is reused and only the difference is
 * asked from mem_sbrk. NULL (errno = ENOMEM) when the region may not grow
 * (rg->full: set here when the narrow format cannot describe the growth)
 * or mem_sbrk refuses; the region is then unchanged, except that the bytes
 * of a partly granted wide growth are kept as a free last block. */
CORE_INLINE char *core_extend(core_cfg_t cfg, size_t asize) {
  int w = (int)cfg.wide;
  core_region_t *rg = core_region(cfg);
  char *b = rg->epi;
  size_t have = 0;
  int merge_last = cfg.extend_missing && !tag_prev_alloc(w, rg->epi);
  if (merge_last) {
    b = tag_prev(w, rg->epi);
    have = tag_size(w, b);
  }
  size_t need = asize > have ? asize - have : 0;
  if (need) {
    if (rg->full) {
      errno = ENOMEM;
      return NULL;
    }
    size_t used = (size_t)(rg->epi + tag_word(w) - rg->base);
    if (!w && (need > CORE_NARROW_MAX_REQUEST || used + need > CORE_NARROW_MAX_REGION)) {
      rg->full = 1; /* beyond the narrow format: growth goes wide from now on */
      errno = ENOMEM;
      return NULL;
    }
    size_t got = core_sbrk(need);
    if (got < need) {
      if (got) core_keep_partial(cfg, got);
      errno = ENOMEM;
      return NULL;
    }
  }
  if (merge_last) idx_remove(cfg, b);
  size_t size = have + need;
  tag_set(w, b, size, 0);
  tag_set_footer(w, b);
  rg->epi = b + size;
  tag_put(w, rg->epi, 0, TAG_ALLOC); /* epilogue; the block before it is free */
  return b;
}

/* Merge the free block b (not in the index, next's prev-alloc bit clear) with
 * its free neighbours and put the result in the index. */
CORE_INLINE char *core_coalesce(core_cfg_t cfg, char *b) {
  int w = (int)cfg.wide;
  size_t size = tag_size(w, b);
  char *next = b + size;
  if (!tag_is_alloc(w, next)) {
    idx_remove(cfg, next);
    size += tag_size(w, next);
  }
  if (!tag_prev_alloc(w, b)) {
    char *prev = tag_prev(w, b);
    idx_remove(cfg, prev);
    size += tag_size(w, prev);
    b = prev;
  }
  tag_set(w, b, size, 0);
  tag_set_footer(w, b);
  idx_insert(cfg, b);
  return b;
}

/* Deferred coalescing: one pass over the region merging every run of free
 * blocks. Called when a search fails, before the heap is grown. */
static void core_coalesce_all(core_cfg_t cfg) {
  int w = (int)cfg.wide;
  core_region_t *rg = core_region(cfg);
  for (char *b = rg->first; b != rg->epi; b = tag_next(w, b)) {
    if (tag_is_alloc(w, b)) continue;
    char *n = tag_next(w, b);
    if (tag_is_alloc(w, n)) continue;
    idx_remove(cfg, b);
    size_t size = tag_size(w, b);
    while (!tag_is_alloc(w, n)) {
      idx_remove(cfg, n);
      size += tag_size(w, n);
      n += tag_size(w, n);
    }
    tag_set(w, b, size, 0);
    tag_set_footer(w, b);
    idx_insert(cfg, b);
  }
}

/* Mark the allocated block b (whose header already has its size) allocated:
 * footer if the policy keeps one, and tell the next block. */
CORE_INLINE void core_mark_alloc(core_cfg_t cfg, char *b, size_t size) {
  int w = (int)cfg.wide;
  tag_set(w, b, size, TAG_ALLOC);
  if (!cfg.footerless) tag_set_footer(w, b);
  tag_set_prev_alloc(w, b + size, 1);
}

/* Allocate asize bytes out of the free block b (already out of the index),
 * splitting off the rest when it is at least the split threshold. high puts
 * the allocation at the top of b (small blocks, kept apart from large ones
 * that are placed at the bottom). Returns the allocated block. */
CORE_INLINE char *core_place(core_cfg_t cfg, char *b, size_t asize, int high) {
  int w = (int)cfg.wide;
  size_t size = tag_size(w, b), rest = size - asize;
  if (rest < core_split_min(cfg)) {
    core_mark_alloc(cfg, b, size);
    return b;
  }
  if (high) {
    tag_set(w, b, rest, 0);
    tag_set_footer(w, b);
    idx_insert(cfg, b);
    char *a = b + rest;
    tag_put(w, a, asize, 0); /* previous block (the rest) is free */
    core_mark_alloc(cfg, a, asize);
    return a;
  }
  tag_set(w, b, asize, TAG_ALLOC);
  if (!cfg.footerless) tag_set_footer(w, b);
  char *r = b + asize;
  tag_put(w, r, rest, TAG_PREV_ALLOC);
  tag_set_footer(w, r); /* the block after r already has prev-alloc clear */
  idx_insert(cfg, r);
  return b;
}

/* malloc within one region: NULL (errno = ENOMEM) when nothing fits and the
 * region cannot grow. */
CORE_INLINE void *core_malloc(core_cfg_t cfg, size_t size) {
  int w = (int)cfg.wide;
  core_region_t *rg = core_region(cfg);
  if (size == 0) return NULL;
  if (size > core_max_request(cfg)) {
    errno = ENOMEM;
    return NULL;
  }
  size_t asize = core_asize(cfg, size);
  int small = cfg.small_max && size <= cfg.small_max;
  char *b = idx_find(cfg, asize);
  if (!b && cfg.deferred && rg->unmerged) {
    /* Only worth a pass when something was freed since the last one: a
     * run of heap growths would otherwise walk the whole heap each time. */
    core_coalesce_all(cfg);
    rg->unmerged = 0;
    b = idx_find(cfg, asize);
  }
  if (b) {
    idx_remove(cfg, b);
  } else {
    b = NULL;
    if (small && !rg->grew_small) {
      /* Small requests interleave with large ones at the heap end: grow
       * by a chunk that later small requests fill from the top and large
       * ones from the bottom (see SMALL_APART_CFG). While only small
       * requests grow the heap, it grows by exactly what they need. */
      size_t chunk = rg->small_live >> cfg.small_chunk_shift;
      if (chunk < cfg.small_chunk) chunk = cfg.small_chunk;
      if (chunk > cfg.small_chunk_max) chunk = cfg.small_chunk_max;
      if (chunk > (mem_heapsize() >> cfg.small_chunk_heap_shift))
        chunk = mem_heapsize() >> cfg.small_chunk_heap_shift;
      chunk &= ~(core_align - 1);
      if (chunk > asize) b = core_extend(cfg, chunk);
    }
    if (!b) b = core_extend(cfg, asize);
    rg->grew_small = small;
    if (!b) return NULL;
  }
  b = core_place(cfg, b, asize, small);
  core_small_account(cfg, tag_size(w, b), +1);
  return tag_payload(w, b);
}

CORE_INLINE void core_free(core_cfg_t cfg, void *p) {
  int w = (int)cfg.wide;
  char *b = tag_block_of(w, p);
  /* The header is read once: tag stores may alias anything (the state
   * included), so each accessor call would load it again. */
  tag_t h = tag_hdr(w, b);
  size_t size = (size_t)(h & ~TAG_FLAGS);
  core_small_account(cfg, size, -1);
  tag_put(w, b, size, h & TAG_PREV_ALLOC);
  tag_put(w, b + size - tag_word(w), size, 0); /* footer */
  tag_set_prev_alloc(w, b + size, 0);
  if (cfg.deferred) {
    idx_insert(cfg, b);
    core_region(cfg)->unmerged = 1;
  } else {
    core_coalesce(cfg, b);
  }
}

/* Cut the allocated block b down to asize, freeing the tail if it is worth it. */
CORE_INLINE void core_shrink(core_cfg_t cfg, char *b, size_t asize) {
  int w = (int)cfg.wide;
  size_t size = tag_size(w, b), rest = size - asize;
  if (rest < core_split_min(cfg)) return;
  tag_set(w, b, asize, TAG_ALLOC);
  if (!cfg.footerless) tag_set_footer(w, b);
  char *r = b + asize;
  tag_put(w, r, rest, TAG_PREV_ALLOC);
  tag_set_footer(w, r);
  tag_set_prev_alloc(w, r + rest, 0);
  if (cfg.deferred) {
    idx_insert(cfg, r);
    core_region(cfg)->unmerged = 1;
  } else {
    core_coalesce(cfg, r);
  }
}

/* In-place realloc, cheapest first: shrink; grow into a free next block;
 * grow at the end of the heap by asking only for what is missing; slide down
 * into a free previous block. Returns the new payload or NULL to move. */
CORE_INLINE void *core_realloc_inplace(core_cfg_t cfg, char *b, size_t asize) {
  int w = (int)cfg.wide;
  core_region_t *rg = core_region(cfg);
  size_t cur = tag_size(w, b);
  if (asize <= cur) {
    core_shrink(cfg, b, asize);
    return tag_payload(w, b);
  }
  char *n = b + cur;
  size_t nsize = tag_is_alloc(w, n) ? 0 : tag_size(w, n);
  if (cur + nsize >= asize) {
    idx_remove(cfg, n);
    core_mark_alloc(cfg, b, cur + nsize);
    core_shrink(cfg, b, asize);
    return tag_payload(w, b);
  }
  if (n == rg->epi || (nsize && cfg.extend_missing && n + nsize == rg->epi)) {
    char *e = core_extend(cfg, asize - cur); /* starts at n */
    if (e) {
      core_mark_alloc(cfg, b, asize);
      return tag_payload(w, b);
    }
    /* A partly granted growth left a free block at n: look again. */
    nsize = tag_is_alloc(w, n) ? 0 : tag_size(w, n);
  }
  if (!tag_prev_alloc(w, b)) {
    char *prev = tag_prev(w, b);
    size_t total = tag_size(w, prev) + cur + nsize;
    if (total >= asize) {
      idx_remove(cfg, prev);
      if (nsize) idx_remove(cfg, n);
      memmove(tag_payload(w, prev), tag_payload(w, b), cur - core_overhead(cfg));
      core_mark_alloc(cfg, prev, total);
      core_shrink(cfg, prev, asize);
      return tag_payload(w, prev);
    }
  }
  return NULL;
}

/* realloc of the allocated payload p of cfg's region without leaving it:
 * in place when the policy does that and it fits, else NULL (move). */
CORE_INLINE void *core_realloc_here(core_cfg_t cfg, void *p, size_t size) {
  if (!cfg.realloc_inplace || size > core_max_request(cfg)) return NULL;
  int w = (int)cfg.wide;
  size_t old_size = tag_size(w, tag_block_of(w, p));
  void *q = core_realloc_inplace(cfg, tag_block_of(w, p), core_asize(cfg, size));
  if (q) {
    core_small_account(cfg, old_size, -1);
    core_small_account(cfg, tag_size(w, tag_block_of(w, q)), +1);
  }
  return q;
}

/* Payload bytes the allocated block of p holds. */
CORE_INLINE size_t core_usable(core_cfg_t cfg, void *p) {
  return tag_size((int)cfg.wide, tag_block_of((int)cfg.wide, p)) - core_overhead(cfg);
}

/* ---- doubly linked free lists (explicit and segregated families) -------- */

/* A list of free blocks linked through their link words: link 0 = next,
 * link 1 = prev, as offsets from the region's base. The tail makes FIFO
 * insertion O(1). A list holds blocks of one region. */
typedef struct core_list_s {
  tag_t head, tail;
} core_list_t;

CORE_INLINE tag_t list_next(core_cfg_t cfg, char *b) { return tag_link((int)cfg.wide, b, 0); }
CORE_INLINE tag_t list_prev(core_cfg_t cfg, char *b) { return tag_link((int)cfg.wide, b, 1); }
CORE_INLINE void list_set_next(core_cfg_t cfg, char *b, tag_t off) {
  tag_set_link((int)cfg.wide, b, 0, off);
}
CORE_INLINE void list_set_prev(core_cfg_t cfg, char *b, tag_t off) {
  tag_set_link((int)cfg.wide, b, 1, off);
}

CORE_INLINE void list_link_between(core_cfg_t cfg, core_list_t *l, char *b, char *prev,
                                   char *next) {
  list_set_prev(cfg, b, prev ? core_off(cfg, prev) : 0);
  list_set_next(cfg, b, next ? core_off(cfg, next) : 0);
  if (prev) list_set_next(cfg, prev, core_off(cfg, b));
  else l->head = core_off(cfg, b);
  if (next) list_set_prev(cfg, next, core_off(cfg, b));
  else l->tail = core_off(cfg, b);
}

CORE_INLINE void list_push_front(core_cfg_t cfg, core_list_t *l, char *b) {
  list_link_between(cfg, l, b, NULL, core_ptr(cfg, l->head));
}

CORE_INLINE void list_push_back(core_cfg_t cfg, core_list_t *l, char *b) {
  list_link_between(cfg, l, b, core_ptr(cfg, l->tail), NULL);
}

/* Address order: O(length) insertion, but first fit then behaves like best
 * fit on many workloads and neighbours in the list are neighbours in memory. */
CORE_INLINE void list_insert_addr(core_cfg_t cfg, core_list_t *l, char *b) {
  char *prev = NULL, *next = core_ptr(cfg, l->head);
  while (next && next < b) {
    prev = next;
    next = core_ptr(cfg, list_next(cfg, next));
  }
  list_link_between(cfg, l, b, prev, next);
}

CORE_INLINE void list_insert(core_cfg_t cfg, core_list_t *l, char *b, enum core_order order) {
  if (order == ORDER_LIFO) list_push_front(cfg, l, b);
  else if (order == ORDER_FIFO) list_push_back(cfg, l, b);
  else list_insert_addr(cfg, l, b);
}

CORE_INLINE void list_remove(core_cfg_t cfg, core_list_t *l, char *b) {
  tag_t prev_off = list_prev(cfg, b), next_off = list_next(cfg, b);
  char *prev = core_ptr(cfg, prev_off), *next = core_ptr(cfg, next_off);
  if (prev) list_set_next(cfg, prev, next_off);
  else l->head = next_off;
  if (next) list_set_prev(cfg, next, prev_off);
  else l->tail = prev_off;
}

/* An array of LIFO lists (size bins or classes) with a bitmap of the
 * non-empty ones, so the first non-empty bin at or above a given one is
 * found with a ctz per 64 bins (segregated and tree policies). */
CORE_INLINE int bins_bit(const uint64_t *nonempty, unsigned c) {
  return (int)((nonempty[c / 64] >> (c % 64)) & 1);
}

CORE_INLINE void bins_push(core_cfg_t cfg, core_list_t *bins, uint64_t *nonempty, unsigned c, char *b) {
  list_push_front(cfg, &bins[c], b);
  nonempty[c / 64] |= (uint64_t)1 << (c % 64);
}

CORE_INLINE void bins_remove(core_cfg_t cfg, core_list_t *bins, uint64_t *nonempty, unsigned c, char *b) {
  list_remove(cfg, &bins[c], b);
  if (!bins[c].head) nonempty[c / 64] &= ~((uint64_t)1 << (c % 64));
}

/* First non-empty bin >= c among the first `words` * 64, or -1. */
CORE_INLINE int bins_next(const uint64_t *nonempty, unsigned words, unsigned c) {
  for (unsigned w = c / 64; w < words; w++) {
    uint64_t bits = nonempty[w];
    if (w == c / 64) bits &= ~(uint64_t)0 << (c % 64);
    if (bits) return (int)(w * 64 + (unsigned)__builtin_ctzll(bits));
  }
  return -1;
}

/* First block of the list that fits, or with best the smallest that fits
 * (stopping at an exact fit). */
CORE_INLINE char *list_find(core_cfg_t cfg, core_list_t *l, size_t asize, int best) {
  char *found = NULL;
  size_t found_size = SIZE_MAX;
  for (char *b = core_ptr(cfg, l->head); b; b = core_ptr(cfg, list_next(cfg, b))) {
    size_t size = tag_size((int)cfg.wide, b);
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

/* Validate one index member of cfg's region and mark it; called by idx_check. */
__attribute__((unused)) static int core_check_member(core_cfg_t cfg, char *b, const char *where,
                                                     char *err, size_t errlen) {
  int w = (int)cfg.wide;
  core_region_t *rg = core_region(cfg);
  if (b < rg->first || b + tag_block_min(w) > rg->epi)
    CORE_FAIL("%s: member at heap offset %td is outside the %s region", where,
              b - (char *)mem_heap_lo(), w ? "wide" : "narrow");
  if (((uintptr_t)b + tag_word(w)) & (core_align - 1))
    CORE_FAIL("%s: member at offset %zu is not a block start (misaligned)", where,
              core_heap_off(b));
  tag_t h = tag_hdr(w, b);
  if (h & TAG_ALLOC)
    CORE_FAIL("%s: allocated block at offset %zu is in a free list", where, core_heap_off(b));
  if (h & TAG_MARK)
    CORE_FAIL("%s: free block at offset %zu is listed twice", where, core_heap_off(b));
  size_t size = (size_t)(h & ~TAG_FLAGS);
  if (size < tag_block_min(w) || size > (size_t)(rg->epi - b) ||
      tag_load(w, b + size - tag_word(w)) != (h & ~TAG_PREV_ALLOC))
    CORE_FAIL("%s: member at offset %zu is not a valid free block", where, core_heap_off(b));
  tag_store(w, b, h | TAG_MARK);
  return 0;
}

/* Check one list: members valid and marked (core_check_member), prev links
 * mirror next links, the tail is the last member, order kept when ordered,
 * and accept(b) true for every member (the right size class). */
__attribute__((unused)) static int core_check_list(core_cfg_t cfg, core_list_t *l,
                                                   const char *where, enum core_order order,
                                                   int (*accept)(char *b, void *ctx), void *ctx,
                                                   char *err, size_t errlen, size_t *count) {
  char *prev = NULL;
  for (char *b = core_ptr(cfg, l->head); b; prev = b, b = core_ptr(cfg, list_next(cfg, b))) {
    if (core_check_member(cfg, b, where, err, errlen) != 0) return -1;
    if (core_ptr(cfg, list_prev(cfg, b)) != prev)
      CORE_FAIL("%s: block at offset %zu has a prev link that does not point back", where,
                core_heap_off(b));
    if (order == ORDER_ADDR && prev && prev >= b)
      CORE_FAIL("%s: block at offset %zu breaks address order", where, core_heap_off(b));
    if (accept && !accept(b, ctx))
      CORE_FAIL("%s: block at offset %zu (size %zu) is in the wrong list", where,
                core_heap_off(b), tag_size((int)cfg.wide, b));
    (*count)++;
  }
  if (core_ptr(cfg, l->tail) != prev)
    CORE_FAIL("%s: tail does not point at the last member", where);
  return 0;
}

/* Clear the marks idx_check left; report the first free block it missed. */
static int core_check_marks(core_cfg_t cfg, char *err, size_t errlen, int report) {
  int w = (int)cfg.wide;
  core_region_t *rg = core_region(cfg);
  int bad = 0;
  for (char *b = rg->first; b != rg->epi; b = tag_next(w, b)) {
    tag_t h = tag_hdr(w, b);
    if (!(h & TAG_ALLOC) && !(h & TAG_MARK) && report && !bad) {
      snprintf(err, errlen, "free block at offset %zu (size %zu) is in no free list",
               core_heap_off(b), (size_t)(h & ~TAG_FLAGS));
      bad = 1;
    }
    tag_store(w, b, h & ~TAG_MARK);
  }
  return bad ? -1 : 0;
}

/* Check cfg's region: the block walk, and with has_index the index. */
static int core_check(core_cfg_t cfg, int has_index, char *err, size_t errlen) {
  int w = (int)cfg.wide;
  size_t word = tag_word(w);
  core_region_t *rg = core_region(cfg);
  char *end = (char *)mem_heap_hi() + 1;
  if (!w && core_rg[1].lo) end = core_rg[1].lo; /* the wide region follows */
  if (rg->epi + word != end)
    CORE_FAIL("epilogue at offset %zu is not the last word of the region (ends at %zu)",
              core_heap_off(rg->epi), core_heap_off(end));
  if (rg->first < rg->lo || (size_t)(rg->first - rg->lo) >= core_align ||
      ((uintptr_t)rg->first + word) & (core_align - 1))
    CORE_FAIL("first block at offset %zu is misaligned", core_heap_off(rg->first));
  int prev_alloc = 1;
  size_t nfree = 0;
  char *b = rg->first;
  for (; b != rg->epi; b = tag_next(w, b)) {
    if (b < rg->first || b + word > rg->epi)
      CORE_FAIL("block walk left the region at offset %td", b - (char *)mem_heap_lo());
    tag_t h = tag_hdr(w, b);
    size_t size = (size_t)(h & ~TAG_FLAGS);
    int alloc = (h & TAG_ALLOC) != 0;
    if (h & TAG_MARK) CORE_FAIL("block at offset %zu has a stray mark bit", core_heap_off(b));
    if (size < tag_block_min(w) || size % core_align)
      CORE_FAIL("block at offset %zu has bad size %zu", core_heap_off(b), size);
    if (size > (size_t)(rg->epi - b))
      CORE_FAIL("block at offset %zu (size %zu) runs past the region end", core_heap_off(b),
                size);
    if ((uintptr_t)tag_payload(w, b) & (core_align - 1))
      CORE_FAIL("payload at offset %zu is not %zu-aligned", core_heap_off(b) + word, core_align);
    if (((h & TAG_PREV_ALLOC) != 0) != prev_alloc)
      CORE_FAIL("block at offset %zu: prev-allocated bit says %d, previous block is %s",
                core_heap_off(b), (h & TAG_PREV_ALLOC) != 0, prev_alloc ? "allocated" : "free");
    tag_t foot = tag_load(w, b + size - word);
    if ((!alloc || !cfg.footerless) && foot != (h & ~TAG_PREV_ALLOC))
      CORE_FAIL("block at offset %zu: footer %#llx disagrees with header %#llx",
                core_heap_off(b), (unsigned long long)foot, (unsigned long long)h);
    if (!alloc) {
      if (!prev_alloc && !cfg.deferred)
        CORE_FAIL("free blocks at offset %zu and before it are not coalesced",
                  core_heap_off(b));
      nfree++;
    }
    prev_alloc = alloc;
  }
  tag_t eh = tag_hdr(w, rg->epi);
  if ((eh & ~TAG_FLAGS) != 0 || !(eh & TAG_ALLOC))
    CORE_FAIL("epilogue header %#llx is not a zero-size allocated block",
              (unsigned long long)eh);
  if (((eh & TAG_PREV_ALLOC) != 0) != prev_alloc)
    CORE_FAIL("epilogue prev-allocated bit disagrees with the last block");
  if (!has_index) return 0;
  size_t listed = 0;
  int rc = idx_check(cfg, err, errlen, &listed);
  if (core_check_marks(cfg, err, errlen, rc == 0) != 0) rc = -1;
  if (rc != 0) return -1;
  if (listed != nfree)
    CORE_FAIL("free lists hold %zu blocks but the heap has %zu free blocks", listed, nfree);
  return 0;
}

__attribute__((unused)) static int core_check_indexed(core_cfg_t cfg, char *err,
                                                      size_t errlen) {
  return core_check(cfg, 1, err, errlen);
}

/* ---- one heap, two regions: what a policy's entry points call ------------ */

CORE_INLINE int core_in_wide(void *p) {
  return __builtin_expect(core_rg[1].lo != NULL, 0) && (char *)p >= core_rg[1].lo;
}

/* A request for the wide region: open it on first use (from then on the
 * narrow region is full and never grows again). */
CORE_INLINE void *core_malloc_wide(core_cfg_t wcfg, size_t size) {
  if (!core_rg[1].lo) {
    if (core_region_open(wcfg) != 0) return NULL;
    core_rg[0].full = 1;
  }
  return core_malloc(wcfg, size);
}

/* The narrow region first: its free blocks, and its growth while it may
 * grow; the wide region for what the narrow one cannot hold. malloc_wide is
 * the policy's out-of-line core_malloc_wide (CORE_DEFINE_POLICY), so the
 * narrow fast path does not carry the wide code's registers. */
CORE_INLINE void *core_malloc_any(core_cfg_t ncfg, void *(*malloc_wide)(size_t), size_t size) {
  if (size == 0) return NULL;
  if (size <= CORE_NARROW_MAX_REQUEST) {
    void *p = core_malloc(ncfg, size);
    if (__builtin_expect(p != NULL || !core_rg[0].full, 1)) return p;
  }
  return malloc_wide(size);
}

CORE_INLINE void core_free_any(core_cfg_t ncfg, core_cfg_t wcfg, void *p) {
  if (!p) return;
  if (core_in_wide(p)) core_free(wcfg, p);
  else core_free(ncfg, p);
}

/* In place within the block's region when the policy can; otherwise a new
 * block (from either region), the contents copied, the old block freed. */
CORE_INLINE void *core_realloc_any(core_cfg_t ncfg, core_cfg_t wcfg,
                                   void *(*malloc_wide)(size_t), void *p, size_t size) {
  if (!p) return core_malloc_any(ncfg, malloc_wide, size);
  if (size == 0) {
    core_free_any(ncfg, wcfg, p);
    return NULL;
  }
  int wide = core_in_wide(p);
  void *q = wide ? core_realloc_here(wcfg, p, size) : core_realloc_here(ncfg, p, size);
  if (q) return q;
  size_t keep = wide ? core_usable(wcfg, p) : core_usable(ncfg, p);
  if (keep > size) keep = size;
  q = core_malloc_any(ncfg, malloc_wide, size);
  if (!q) return NULL;
  memcpy(q, p, keep);
  core_free_any(ncfg, wcfg, p);
  return q;
}

typedef int (*core_checker_t)(core_cfg_t cfg, char *err, size_t errlen);

/* Both regions with the family's checker; a message names the region once
 * the wide one is open. */
__attribute__((unused)) static int core_check_any(core_cfg_t ncfg, core_cfg_t wcfg,
                                                  core_checker_t checker, char *err,
                                                  size_t errlen) {
  int wide_open = core_rg[1].lo != NULL;
  for (int w = 0; w <= wide_open; w++) {
    if (checker(w ? wcfg : ncfg, err, errlen) == 0) continue;
    if (wide_open && errlen) {
      char what[512];
      snprintf(what, sizeof what, "%s", err);
      snprintf(err, errlen, "%s region: %s", w ? "wide" : "narrow", what);
    }
    return -1;
  }
  if (wide_open && !core_rg[0].full)
    CORE_FAIL("the wide region is open but the narrow region may still grow");
  return 0;
}

/* ---- declaring a policy --------------------------------------------------- */

/* Define the lab_policy_t `ident` for one constant configuration (the
 * designated initialisers after `checker`), in both widths. The wrappers are
 * where the compiler specialises the core for it. `checker` is
 * core_check_indexed or a family's own (a core_checker_t). Family files wrap
 * this in FAMILY_POLICY(ident, "name", ...) macros, one policy per line,
 * which lab/handout/make_mm.sh looks up. */
#define CORE_DEFINE_POLICY(ident, pname, desc, checker, ...)                      \
  static const core_cfg_t ident##_cfg = {__VA_ARGS__};                          \
  static const core_cfg_t ident##_wcfg = {.wide = 1, __VA_ARGS__};              \
  static int ident##_init(size_t a) { return core_init(ident##_cfg, a); }        \
  static __attribute__((noinline, cold)) void *ident##_malloc_wide(size_t n) {  \
    return core_malloc_wide(ident##_wcfg, n);                                    \
  }                                                                              \
  static void *ident##_malloc(size_t n) {                                       \
    return core_malloc_any(ident##_cfg, ident##_malloc_wide, n);                 \
  }                                                                              \
  static void ident##_free(void *p) { core_free_any(ident##_cfg, ident##_wcfg, p); } \
  static void *ident##_realloc(void *p, size_t n) {                             \
    return core_realloc_any(ident##_cfg, ident##_wcfg, ident##_malloc_wide, p, n); \
  }                                                                              \
  static int ident##_check(char *e, size_t l) {                                 \
    return core_check_any(ident##_cfg, ident##_wcfg, checker, e, l);             \
  }                                                                              \
  const lab_policy_t ident = {pname,          desc,          ident##_init,       \
                              ident##_malloc, ident##_free,  ident##_realloc,    \
                              ident##_check};

#endif
