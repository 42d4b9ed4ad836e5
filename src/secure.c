/* secure.c — the hardened mode's checks (compiled in with TES_SECURE=1, the
 * tessera_secure target; empty otherwise).
 *
 * Adds to the default build: free-list links XORed with a per-page random key
 * (internal.h), randomised allocation order within a page (the extension
 * shuffles), a guard page after every large block (large.c) and at the end of
 * every small/medium segment, and at free time: the pointer must be a block
 * start in a page in use (else "invalid free": stack, global, interior,
 * misaligned, foreign), must not already be on a free list ("double free"),
 * and the 16 bytes of padding after the requested size must be intact
 * ("heap buffer overflow"). Padding layout at the block's end:
 *   [canary: 8 bytes = key ^ address][requested size ^ key: 8 bytes]
 * plus a few 0xBD bytes right after the requested size when the class leaves
 * room. malloc_usable_size returns the requested size in this mode. */
#include "internal.h"

#if TES_SECURE

#define PATTERN 0xBD
#define PATTERN_BYTES 8
#define PATTERN_WORD 0xBDBDBDBDBDBDBDBDull

typedef struct padding_s {
  uintptr_t canary;
  uintptr_t requested;
} padding_t;

static padding_t *padding_of(const tes_page_t *page, const void *p) {
  return (padding_t *)((uint8_t *)p + page->block_size - sizeof(padding_t));
}

void tes_secure_on_alloc(tes_page_t *page, void *p, size_t requested) {
  /* Forget the free-list link: a live block must not look free to the
   * double-free filter in tes_secure_check_free (which then walks lists). */
  ((tes_block_t *)p)->next = NULL; /* the padding pattern may overwrite part of it */
  tes_secure_set_padding(page, p, requested);
}

void tes_secure_set_padding(tes_page_t *page, void *p, size_t requested) {
  padding_t *pad = padding_of(page, p);
  pad->canary = page->key ^ (uintptr_t)p;
  pad->requested = requested ^ page->key;
  uint8_t *tail = (uint8_t *)p + requested;
  size_t room = (size_t)((uint8_t *)pad - tail);
  if (room >= PATTERN_BYTES) {
    uint64_t word = PATTERN_WORD;
    memcpy(tail, &word, sizeof word); /* one unaligned store */
  } else {
    for (size_t i = 0; i < room; i++) tail[i] = PATTERN;
  }
}

size_t tes_secure_requested(const tes_page_t *page, const void *p) {
  size_t requested = padding_of(page, p)->requested ^ page->key;
  size_t limit = page->block_size - sizeof(padding_t);
  return requested <= limit ? requested : limit;
}

void tes_secure_check_padding(tes_page_t *page, void *p) {
  padding_t *pad = padding_of(page, p);
  bool ok = pad->canary == (page->key ^ (uintptr_t)p);
  size_t requested = pad->requested ^ page->key;
  if (ok && requested <= page->block_size - sizeof(padding_t)) {
    const uint8_t *tail = (const uint8_t *)p + requested;
    size_t room = (size_t)((const uint8_t *)pad - tail);
    if (room >= PATTERN_BYTES) {
      uint64_t word;
      memcpy(&word, tail, sizeof word);
      ok = word == PATTERN_WORD;
    } else {
      for (size_t i = 0; i < room; i++) ok &= tail[i] == PATTERN;
    }
  } else {
    ok = false;
  }
  if (!ok) tes_report_error(TES_ERR_OVERFLOW, p, page);
}

bool tes_secure_check_free(tes_segment_t *seg, tes_page_t *page, void *p) {
  if (seg->cookie != ((uintptr_t)seg ^ tes_process_key)) {
    tes_report_error(TES_ERR_INVALID_FREE, p, NULL);
    return false;
  }
  if (seg->kind == TES_SEG_LARGE) {
    if ((uint8_t *)p != page->area || !page->in_use) {
      tes_report_error(TES_ERR_INVALID_FREE, p, NULL);
      return false;
    }
    tes_secure_check_padding(page, p);
    return true;
  }
  return tes_secure_check_block(page, p);
}

/* A small/medium block: the page is known to be ours (slice table or
 * segment map), so the segment header is not read again. */
bool tes_secure_check_block(tes_page_t *page, void *p) {
  const uint8_t *area = page->area;
  size_t offset = (size_t)((const uint8_t *)p - area);
  /* offset / block_size by multiplication (exact for offsets < 2^19 and
   * blocks < 2^21, see tes_page_init); a block start iff it divides back. */
  size_t index = (size_t)(((uint64_t)offset * page->reciprocal) >> 40);
  if (!page->in_use || (const uint8_t *)p < area || offset >= ((size_t)1 << TES_MEDIUM_PAGE_SHIFT) ||
      index * page->block_size != offset || index >= page->capacity) {
    tes_report_error(TES_ERR_INVALID_FREE, p, page->in_use ? page : NULL);
    return false;
  }
  /* A freed block's first word is an encoded link: NULL or a block of this
   * page. Only then search the lists (cheap filter, exact answer). */
  uintptr_t link = (uintptr_t)tes_block_next(page, (tes_block_t *)p);
  bool looks_free = link == 0 || (link >= (uintptr_t)area &&
                                  link < (uintptr_t)area + (size_t)page->capacity * page->block_size);
  if (looks_free && tes_page_contains_free(page, (tes_block_t *)p)) {
    tes_report_error(TES_ERR_DOUBLE_FREE, p, page);
    return false;
  }
  tes_secure_check_padding(page, p); /* an overflow is reported; the block is still freed */
  return true;
}

void tes_secure_shuffle(tes_page_t *page, tes_block_t **first, size_t count) {
  /* count <= TES_EXTEND_BYTES / 16 */
  uint16_t order[TES_EXTEND_BYTES / 16];
  size_t base = page->capacity;
  for (size_t i = 0; i < count; i++) order[i] = (uint16_t)i;
  tes_heap_t *heap = atomic_load_explicit(&page->heap, memory_order_relaxed);
  uint64_t x = heap ? heap->random : tes_random_next();
  for (size_t i = count - 1; i > 0; i--) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t j = (size_t)(x % (i + 1));
    uint16_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  if (heap) heap->random = x;
  tes_block_t *next = page->free;
  for (size_t k = count; k-- > 0;) {
    tes_block_t *b = (tes_block_t *)(page->area + (base + order[k]) * page->block_size);
    tes_block_set_next(page, b, next);
    next = b;
  }
  *first = next;
}

#endif
