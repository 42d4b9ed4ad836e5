/* block_tags: the boundary-tag block formats shared by every lab policy.
 *
 * A block is a header word followed by its payload; free blocks (and, in the
 * policies that keep them, allocated blocks) end with a footer word equal to
 * the header (less the prev-allocated bit). There are two widths of the same
 * format, and every accessor takes which one (`wide`, 0 or 1; heap_core.h
 * passes a compile-time constant, so each call folds to one load or store):
 *
 *   narrow  4-byte header/footer words holding 32-bit sizes; free-list links
 *           are 32-bit offsets from the region's base instead of 8-byte
 *           pointers. The smallest free block is 16 bytes (header, two links,
 *           footer). Blocks below 2 GiB, regions below 4 GiB. This is what
 *           every heap starts with: small tags are what keeps tiny blocks
 *           cheap (utilization on the classic and 64-bit trace sets).
 *   wide    8-byte words holding 64-bit sizes; links are 64-bit offsets. The
 *           smallest block is 32 bytes. Any size the heap can hold. Used for
 *           what the narrow format cannot describe (heap_core.h: "one heap,
 *           two regions").
 *
 * Header bits (sizes are multiples of 8, so the low three bits are free):
 *   bit 0  TAG_ALLOC       the block is allocated
 *   bit 1  TAG_PREV_ALLOC  the block before it is allocated; this is what lets
 *                          allocated blocks drop their footer
 *   bit 2  TAG_MARK        used only inside check() to find list members
 *
 * Blocks are addressed by the address of their header ("b"); the payload is
 * b + word. With alignment A (8 or 16) every header sits at an address that
 * is A - word modulo A and every block size is a multiple of A.
 *
 * Included by heap_core.h (the shared allocator skeleton) and through it by
 * every lab/policy_*.c file; nothing here has state. */
#ifndef TESSERA_LAB_BLOCK_TAGS_H
#define TESSERA_LAB_BLOCK_TAGS_H

#include <stddef.h>
#include <stdint.h>

/* The words as stored; may_alias because they sit inside payload memory. */
typedef uint32_t __attribute__((may_alias)) tag32_t;
typedef uint64_t __attribute__((may_alias)) tag64_t;
/* A header value or link of either width, as the code handles it. */
typedef uint64_t tag_t;

#define TAG_ALLOC      ((tag_t)1)
#define TAG_PREV_ALLOC ((tag_t)2)
#define TAG_MARK       ((tag_t)4)
#define TAG_FLAGS      ((tag_t)7)

/* Bytes in a header or footer word (and in one link). */
static inline size_t tag_word(int wide) { return wide ? 8 : 4; }
/* Header + two links + footer: 16 narrow, 32 wide. */
static inline size_t tag_block_min(int wide) { return 4 * tag_word(wide); }

static inline tag_t tag_load(int wide, const char *p) {
  return wide ? *(const tag64_t *)(const void *)p : *(const tag32_t *)(const void *)p;
}
static inline void tag_store(int wide, char *p, tag_t v) {
  if (wide) *(tag64_t *)(void *)p = v;
  else *(tag32_t *)(void *)p = (uint32_t)v;
}

static inline tag_t tag_hdr(int wide, char *b) { return tag_load(wide, b); }
static inline size_t tag_size(int wide, char *b) { return (size_t)(tag_hdr(wide, b) & ~TAG_FLAGS); }
static inline int tag_is_alloc(int wide, char *b) { return (tag_hdr(wide, b) & TAG_ALLOC) != 0; }
static inline int tag_prev_alloc(int wide, char *b) {
  return (tag_hdr(wide, b) & TAG_PREV_ALLOC) != 0;
}
static inline char *tag_next(int wide, char *b) { return b + tag_size(wide, b); }
static inline char *tag_footer(int wide, char *b) { return b + tag_size(wide, b) - tag_word(wide); }
/* Only valid when the previous block is free (it then has a footer). */
static inline char *tag_prev(int wide, char *b) {
  return b - (size_t)(tag_load(wide, b - tag_word(wide)) & ~TAG_FLAGS);
}
static inline void *tag_payload(int wide, char *b) { return b + tag_word(wide); }
static inline char *tag_block_of(int wide, void *payload) {
  return (char *)payload - tag_word(wide);
}

/* Write a whole header word (size | flags). */
static inline void tag_put(int wide, char *b, size_t size, tag_t flags) {
  tag_store(wide, b, (tag_t)size | flags);
}
/* Set the header, keeping the block's own prev-allocated bit. */
static inline void tag_set(int wide, char *b, size_t size, tag_t alloc) {
  tag_put(wide, b, size, alloc | (tag_hdr(wide, b) & TAG_PREV_ALLOC));
}
/* The footer copies the header without the prev-allocated bit: that bit
 * changes when the previous block does, and only the header needs it. */
static inline void tag_set_footer(int wide, char *b) {
  tag_store(wide, tag_footer(wide, b), tag_hdr(wide, b) & ~TAG_PREV_ALLOC);
}
static inline void tag_set_prev_alloc(int wide, char *b, int prev_alloc) {
  tag_t h = tag_hdr(wide, b);
  tag_store(wide, b, prev_alloc ? h | TAG_PREV_ALLOC : h & ~TAG_PREV_ALLOC);
}

/* Free-block links: two words right after the header. Lists use them as
 * next/prev, the tree as left/right child. Offset 0 means "none". A link is
 * addressed by its "slot" (the address of the word), so code that walks
 * slot pointers (the treap) works in both widths. */
static inline char *tag_link_slot(int wide, char *b, int k) {
  return b + (size_t)(k + 1) * tag_word(wide);
}
static inline tag_t tag_link(int wide, char *b, int k) {
  return tag_load(wide, tag_link_slot(wide, b, k));
}
static inline void tag_set_link(int wide, char *b, int k, tag_t off) {
  tag_store(wide, tag_link_slot(wide, b, k), off);
}

#endif
