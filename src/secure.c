/* secure.c — the hardened mode's checks (compiled in with TES_SECURE=1, the
 * tessera_secure target; empty otherwise). Costs are stated because the
 * hardened build promises at most ~10% over the default one.
 *
 * What the hardened build adds, and where the work is done:
 *  - free-list links encoded with two random keys per page (internal.h,
 *    tes_link_encode: 3 instructions per link);
 *  - randomised allocation order within a page: each extension of a page's
 *    free list links its new blocks in a shuffled order (here, once per
 *    8 KiB of blocks, through a shuffle buffer of about 1 KiB: every block
 *    one of 24-64 equally likely ones; malloc itself only pops);
 *  - the block freed last is not the next one handed out: the bins (medium
 *    classes only, internal.h tes_sbin_t) are out of band and hand out a
 *    random block below the one freed last, and a page whose free list is
 *    refilled from its frees keeps that block back (internal.h,
 *    tes_secure_hold_back);
 *  - guard pages (PROT_NONE) at fixed places of every segment, set once when
 *    the segment is mapped and kept while it sits in the segment cache: one
 *    right after the header, one as the segment's last OS page. A large
 *    block is placed at the END of its segment so that the last guard
 *    directly follows it: reusing a cached segment costs no mprotect;
 *  - at free (tes_secure_free_quick, inline in the free fast path, and
 *    tes_secure_free_verdict here, which reports, when it fails): the pointer
 *    must be a carved block start of a page in use (else "invalid free":
 *    stack, global, interior, misaligned, foreign — the first two and the
 *    last are refused by the slice table / segment map, the others by a
 *    one-multiply block test); it must not have been freed already ("double
 *    free": free writes a tag into the block's size word, which no live
 *    block has (the owner's inline free one tag, every other free another,
 *    which the owner finds on every block it takes from a remote stack or
 *    its delayed list: tes_secure_remote_block_ok); blocks found on a free
 *    list count too; a large block,
 *    whose segment left the segment map at its first free, is found in
 *    large.c's ring of recent large frees, consulted only when nobody owns
 *    the pointer: tes_report_unowned); the canary right
 *    after the requested size must be intact ("heap buffer overflow
 *    detected at free"; the block is still freed).
 * Block layout (internal.h): small blocks
 * [requested][canary 4 B][slack][requested size, 4 B], medium blocks
 * [requested][canary 4 B][slack] with the 4-byte size in a slot of their
 * segment's header (tes_secure_size_word; TES_PADDING = 8 for both,
 * tes_secure_arm); large blocks [requested][canary 8 B][slack]
 * (TES_LARGE_PADDING = 8) with the 8-byte size in their segment's header
 * (large_requested). The canary is the
 * page's keys[1] (random, every byte's top bit set). malloc_usable_size
 * returns the requested size in this mode. Called from alloc_inline.h, free.c, alloc.c,
 * heap.c, page.c, segment.c and large.c. */
#include "internal.h"

#if TES_SECURE

#define DIVISOR(c) (UINT64_MAX / TES_CLASS_SIZE_EXPR(c) + 1)
#define D4(c) DIVISOR(c), DIVISOR(c + 1), DIVISOR(c + 2), DIVISOR(c + 3)
const uint64_t tes_secure_divisors[TES_CLASS_COUNT] = {
    D4(0), D4(4), D4(8), D4(12), D4(16), D4(20), D4(24), D4(28), D4(32), D4(36), D4(40), D4(44), D4(48), D4(52), D4(56),
    D4(60),
};
static_assert(sizeof tes_secure_divisors / sizeof tes_secure_divisors[0] == TES_CLASS_COUNT, "every class");
static_assert(((size_t)1 << TES_MEDIUM_PAGE_SHIFT) <= ((size_t)1 << 32) && TES_MEDIUM_BLOCK_MAX < ((size_t)1 << 32),
              "offsets and block sizes below 2^32: the one-multiply block test is exact");

/* ---- the reporting half of tes_secure_free_quick --------------------------- */
typedef enum { SIZE_RECORDED, SIZE_FREED_TAG, SIZE_OVERWRITTEN } size_word_t;
static size_word_t recorded_size(const tes_page_t *page, const void *p, size_t *requested);
static void check_canary(const tes_page_t *page, const void *p, size_word_t state, size_t requested);

bool tes_secure_free_verdict(const tes_page_t *page, void *p) {
  size_t index;
  if (!tes_page_in_use_any_thread(page)) { /* a retired page still in the slice table */
    tes_report_unowned(p);
    return false;
  }
  if (!tes_secure_block_index(page, p, &index) || index >= tes_page_capacity_any_thread(page)) {
    tes_report_error(TES_ERR_INVALID_FREE, p, page);
    return false;
  }
  /* The size word as judged below: the tag replaces it only if it is still
   * that (another thread freeing the block at the same moment tagged it
   * meanwhile: a double free). */
  uint32_t *size_word = tes_secure_size_word(page, p);
  uint32_t seen = __atomic_load_n(size_word, __ATOMIC_RELAXED);
  size_t requested;
  size_word_t state = recorded_size(page, p, &requested);
  /* Freed before: the tag, or (a block never handed out, or whose tag a
   * stray write replaced) on one of the page's free lists. The search is
   * exact and bounded, and runs only here, off the fast path. */
  if (state == SIZE_FREED_TAG || tes_page_contains_free(page, (const tes_block_t *)p)) {
    tes_report_error(TES_ERR_DOUBLE_FREE, p, page);
    return false;
  }
  check_canary(page, p, state, requested); /* an overflow is reported; the block is still freed */
  if (!tes_rmw_cas32(size_word, &seen, TES_FREED_TAG32_REMOTE)) {
    tes_report_error(TES_ERR_DOUBLE_FREE, p, page);
    return false;
  }
  return true;
}

void tes_secure_free_local(void *p, tes_page_t *page) {
  if (tes_secure_free_verdict(page, p)) tes_free_local_block(page, (tes_block_t *)p);
}

/* ---- padding ----------------------------------------------------------------
 * Two layouts (internal.h): large pages (class_index 0xff) keep a 64-bit
 * canary and the requested size in their segment's header; small and medium
 * ones a 32-bit canary and a 32-bit size. */
static bool page_is_large(const tes_page_t *page) { return page->class_index == 0xff; }

/* A large block's size word: in its segment's header (a large page is its
 * segment's pages[0]), which malloc writes anyway; at the block's end it
 * faulted in an OS page the program may never touch. */
static size_t *large_size_word(const tes_page_t *page) {
  return &((tes_segment_t *)((uintptr_t)page - offsetof(tes_segment_t, pages)))->large_requested;
}

void tes_secure_set_padding(tes_page_t *page, void *p, size_t requested) {
  if (!page_is_large(page)) {
    tes_secure_arm(page, p, requested, false);
    return;
  }
  memcpy((uint8_t *)p + requested, &page->keys[1], sizeof(uintptr_t));
  *large_size_word(page) = requested;
}

/* A block just handed out for more than `requested` bytes: arm it for
 * `requested` instead (the canary moves down; realloc's headroom). */
void tes_secure_rearm(void *p, size_t requested) {
  tes_segment_t *seg = tes_segment_of(p);
  tes_secure_set_padding(seg->kind == TES_SEG_LARGE ? &seg->pages[0] : tes_page_of(seg, p), p, requested);
}

/* A size word's value judged against the layout's limit and freed tag
 * (*requested: 0 unless SIZE_RECORDED). */
static size_word_t judge_word(size_t word, size_t limit, size_t tag, size_t *requested) {
  *requested = word <= limit ? word : 0;
  return word <= limit ? SIZE_RECORDED : word == tag ? SIZE_FREED_TAG : SIZE_OVERWRITTEN;
}

/* The requested size the block's size word records (0 unless
 * SIZE_RECORDED), in the page's layout. */
static size_word_t recorded_size(const tes_page_t *page, const void *p, size_t *requested) {
  size_t word, limit, tag;
  if (page_is_large(page)) {
    word = *large_size_word(page);
    limit = page->block_size - TES_LARGE_PADDING;
    tag = TES_FREED_TAG;
  } else {
    uint32_t word32;
    memcpy(&word32, tes_secure_size_word(page, p), sizeof word32);
    word = word32;
    limit = page->block_size - TES_PADDING;
    tag = word == TES_FREED_TAG32_REMOTE ? TES_FREED_TAG32_REMOTE : TES_FREED_TAG32;
  }
  return judge_word(word, limit, tag, requested);
}

size_t tes_secure_requested(const tes_page_t *page, const void *p) {
  size_t requested;
  if (recorded_size(page, p, &requested) == SIZE_RECORDED) return requested;
  return page->block_size - (page_is_large(page) ? TES_LARGE_PADDING : TES_PADDING);
}

/* Reports an overflow (or a double free, when the size word holds the
 * freed tag) unless the canary after the recorded size is intact. */
static void check_canary(const tes_page_t *page, const void *p, size_word_t state, size_t requested) {
  if (state == SIZE_RECORDED) {
    const uint8_t *at = (const uint8_t *)p + requested;
    if (page_is_large(page)) {
      uintptr_t canary;
      memcpy(&canary, at, sizeof canary);
      if (canary == page->keys[1]) return;
    } else {
      uint32_t canary;
      memcpy(&canary, at, sizeof canary);
      if (canary == (uint32_t)page->keys[1]) return;
    }
  }
  tes_report_error(state == SIZE_FREED_TAG ? TES_ERR_DOUBLE_FREE : TES_ERR_OVERFLOW, p, page);
}

bool tes_secure_check_padding(const tes_page_t *page, const void *p) {
  size_t requested;
  size_word_t state = recorded_size(page, p, &requested);
  check_canary(page, p, state, requested);
  return state != SIZE_FREED_TAG;
}

/* Frees that missed the slice table: remote frees, large blocks, pages whose
 * slice lost its slot. tes_owned_segment has already checked the segment
 * map and, for small/medium, that p lies in a page in use at or after its
 * first block. */
bool tes_secure_check_free(tes_segment_t *seg, tes_page_t *page, void *p) {
  if (!tes_secure_cookie_ok(seg)) {
    tes_report_error(TES_ERR_INVALID_FREE, p, NULL);
    return false;
  }
  if (seg->kind == TES_SEG_LARGE) {
    if ((uint8_t *)p != page->area) {
      tes_report_error(TES_ERR_INVALID_FREE, p, NULL);
      return false;
    }
    if (!tes_page_in_use_any_thread(page)) { /* freed since tes_owned_segment looked: by another thread, at the same moment */
      tes_report_unowned(p); /* in the ring of large frees (written before in_use cleared): a double free */
      return false;
    }
    /* The tag goes in and the recorded size comes out in one atomic
     * exchange (the word is the segment header's large_requested), so that of two threads freeing the block at the
     * same moment, the second finds the tag: a double free. Before, both
     * could pass while the first had not yet cleared in_use, and the
     * segment was freed twice (eighteenth session; one locked instruction
     * a large free, which takes large_lock anyway). */
    size_t requested;
    size_word_t state = judge_word(__atomic_exchange_n(large_size_word(page), TES_FREED_TAG, __ATOMIC_RELAXED),
                                   page->block_size - TES_LARGE_PADDING, TES_FREED_TAG, &requested);
    if (state == SIZE_FREED_TAG) {
      tes_report_error(TES_ERR_DOUBLE_FREE, p, page);
      return false;
    }
    check_canary(page, p, state, requested); /* an overflow is reported; the block is still freed */
    return true;
  }
  return tes_secure_free_quick_any_thread(page, p) || tes_secure_free_verdict(page, p);
}

/* ---- keys and allocation order ------------------------------------------------ */
void tes_secure_page_init(tes_page_t *page) {
  page->keys[0] = (uintptr_t)tes_random_next();
  page->keys[1] = (uintptr_t)tes_random_next() | TES_CANARY_BITS;
}

/* Link `count` new blocks (from index page->capacity on) in a random order
 * in front of page->free, through a shuffle buffer: a pool of the
 * extension's first k blocks (k per class, shuffle_pool below, clamped to
 * count); each step hands out one of the pool's blocks drawn uniformly
 * and puts the next block in address order in its place; the last k
 * steps drain the pool. The pool is always the k lowest blocks not handed
 * out yet, so every block but the last few of an extension is one of k
 * equally likely ones, whatever is known of the blocks handed out before
 * (3.5-5.8 bits a step for blocks up to 256 B, at least mimalloc's secure
 * extension's 2.4-5.0 bits, 1.6-4.0 for its best guess, up to 320 B),
 * while the walk stays near the address order: a block is handed out at
 * most k - 1 steps early and, on average, k steps late. The full
 * Fisher-Yates of each 8 KiB extension it replaces made programs that
 * walk their objects in allocation order (CPython) up to 2x as slow: the
 * hardware prefetchers cannot follow a walk spread over 8 KiB
 * (RELIABILITY.md, nineteenth, twentieth and twenty-second sessions). From
 * 384 B on an extension holds fewer blocks than the pool, and the order
 * is a full shuffle of it, as before. Each xorshift step gives four 16-bit
 * draws, the bound taken by a multiply (bias below 0.1% with k <= 64).
 * About 16 instructions a block, paid once per carved block, never per
 * malloc. */
#define TES_SHUFFLE_POOL_MIN 24 /* from 384 B on: more than an extension's blocks (21 at most) */
#define TES_SHUFFLE_POOL_MAX 64
/* The pool of each class up to 320 B (16, 32, ..., 256, then 320 B): the
 * smallest k whose mean Shannon bits a step over an extension are at least
 * those of mimalloc's secure extension of that block size and whose best
 * guess (1 / k a step, more in the last k steps) is right at most 1 in 10
 * times, and never more than the twentieth session's pool (1 KiB of
 * blocks, clamped to [24, 64]): 64 and 32 blocks at 16 and 32 B as before,
 * 24 from 176 B on. Its floor of 24 blocks was set by 64 B (mimalloc: a
 * full shuffle of 64 blocks, 4.16 bits; 21 here); 48 B needs 12 (mimalloc
 * 3.41 bits, its best guess 2.29), 80 B 13 (2.38). CPython's objects are
 * mostly blocks of 48 and 64 B. RELIABILITY.md's twenty-second session
 * has the table; the probe security.allocation_order_pool reads the pools
 * back. Every entry is at most TES_SHUFFLE_POOL_MAX. */
static const uint8_t shuffle_pool[] = {64, 32, 12, 21, 13, 14, 15, 16, 19, 21, 24, 24, 24, 24, 24, 24, 24};
static_assert(sizeof shuffle_pool == 17 && TES_CLASS_SIZE_EXPR(16) == 320, "classes of 16-320 B");

static size_t shuffle_pool_of(unsigned class_index) {
  return class_index < sizeof shuffle_pool ? shuffle_pool[class_index] : TES_SHUFFLE_POOL_MIN;
}

/* One step of xorshift64 (13, 7, 17): four 16-bit draws a step. */
static inline uint64_t xorshift64(uint64_t x) {
  x ^= x << 13;
  x ^= x >> 7;
  return x ^ (x << 17);
}

void tes_secure_shuffle(tes_page_t *page, tes_block_t **first, size_t count) {
  uint32_t pool[TES_SHUFFLE_POOL_MAX];
  static_assert(TES_SHUFFLE_POOL_MIN <= TES_SHUFFLE_POOL_MAX, "the pool array holds it");
  static_assert(TES_MEDIUM_PAGE_SHIFT < 32, "offsets fit 32 bits");
  tes_heap_t *heap = atomic_load_explicit(&page->heap, memory_order_relaxed);
  uint64_t x = heap && heap->random ? heap->random : tes_random_next() | 1;
  uint32_t block_size = (uint32_t)page->block_size;
  size_t m = shuffle_pool_of(page->class_index);
  if (m > count) m = count;
  for (size_t i = 0; i < m; i++) pool[i] = (uint32_t)i * block_size;
  uint32_t refill = (uint32_t)m * block_size, end = (uint32_t)count * block_size;
  uint8_t *start = page->area + (size_t)page->capacity * page->block_size;
  /* Block j of the pool is handed out (linked after the previous one) and
   * replaced by the next block in address order, or, once every block is
   * in the pool, by the pool's last one. */
#define HAND_OUT(draw)                                                     \
  do {                                                                     \
    size_t j_ = (size_t)(((uint64_t)(uint16_t)(draw) * m) >> 16);          \
    tes_block_t *b_ = (tes_block_t *)(start + pool[j_]);                   \
    if (refill < end) {                                                    \
      pool[j_] = refill;                                                   \
      refill += block_size;                                                \
    } else {                                                               \
      pool[j_] = pool[--m];                                                \
    }                                                                      \
    prev->next = (tes_block_t *)tes_link_encode(page, (uintptr_t)b_);      \
    prev = (tes_block_t *)((uint8_t *)b_ + link_offset);                   \
  } while (0)
  /* prev: whose `next` is the link to write next (tes_block_link_slot: a
   * medium block's is in its last 16 bytes); the first block's lands in
   * `link`. */
  tes_block_t link = {0}, *prev = &link;
  size_t link_offset = (size_t)((uint8_t *)tes_block_link_slot(page, (tes_block_t *)start) - start); /* once */
  while (m >= 4) {
    x = xorshift64(x);
    HAND_OUT(x);
    HAND_OUT(x >> 16);
    HAND_OUT(x >> 32);
    HAND_OUT(x >> 48);
  }
  x = xorshift64(x);
  for (uint64_t draws = x; m > 0; draws >>= 16) HAND_OUT(draws);
#undef HAND_OUT
  tes_block_t *head = (tes_block_t *)tes_link_decode(page, (uintptr_t)link.next);
  prev->next = (tes_block_t *)tes_link_encode(page, (uintptr_t)page->free);
  if (heap) heap->random = x;
  *first = head;
}

/* ---- guard pages ------------------------------------------------------------------ */
/* The largest header (a small segment's: 64 page descriptors). */
static size_t header_bytes(void) { return offsetof(tes_segment_t, pages) + TES_SMALL_PAGES * sizeof(tes_page_t); }

size_t tes_secure_header_guard(void) {
  size_t ps = tes_os_page_size();
  size_t at = (header_bytes() + ps - 1) & ~(ps - 1);
  /* It must end before the remote-free bitmaps (32 KiB; the first block
   * page is at 64 KiB in a small segment): OS pages of 32 KiB and more go
   * without it. */
  return at + ps <= TES_REMOTE_BITS_OFFSET ? at : 0;
}

size_t tes_secure_first_free_offset(void) {
  size_t guard = tes_secure_header_guard();
  size_t ps = tes_os_page_size();
  return guard ? guard + ps : (header_bytes() + ps - 1) & ~(ps - 1);
}

/* With OS pages as large as a small page (64 KiB), the end guard would take
 * the whole last page of a small segment: such systems go without it. */
bool tes_secure_end_guard(void) { return tes_os_page_size() < ((size_t)1 << TES_SMALL_PAGE_SHIFT); }

void tes_secure_guard_segment(void *seg, size_t size) {
  size_t ps = tes_os_page_size();
  size_t guard = tes_secure_header_guard();
  if (guard) tes_os_protect((uint8_t *)seg + guard, ps);
  if (tes_secure_end_guard()) tes_os_protect((uint8_t *)seg + size - ps, ps);
}

#endif
