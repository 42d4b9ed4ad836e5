/* block_tags: the boundary-tag block layout shared by every lab policy.
 *
 * A block is a 4-byte header word followed by its payload; free blocks (and,
 * in the policies that keep them, allocated blocks) end with a footer word
 * equal to the header (less the prev-allocated bit). Because every heap stays
 * below 4 GiB, a size fits in 32 bits and free-list links are stored as
 * 32-bit offsets from the heap base instead of 8-byte pointers: the smallest
 * free block is 16 bytes (header, two links, footer), which is also the
 * minimal block size of every policy.
 *
 * Header bits (sizes are multiples of 8, so the low three bits are free):
 *   bit 0  TAG_ALLOC       the block is allocated
 *   bit 1  TAG_PREV_ALLOC  the block before it is allocated; this is what lets
 *                          allocated blocks drop their footer
 *   bit 2  TAG_MARK        used only inside check() to find list members
 *
 * Blocks are addressed by the address of their header ("b"); the payload is
 * b + 4. With alignment A (8 or 16) every header sits at an address that is
 * A - 4 modulo A and every block size is a multiple of A.
 *
 * Included by heap_core.h (the shared allocator skeleton) and through it by
 * every lab/policy_*.c file; nothing here has state. */
#ifndef TESSERA_LAB_BLOCK_TAGS_H
#define TESSERA_LAB_BLOCK_TAGS_H

#include <stddef.h>
#include <stdint.h>

typedef uint32_t __attribute__((may_alias)) tag_t;

#define TAG_ALLOC      ((tag_t)1)
#define TAG_PREV_ALLOC ((tag_t)2)
#define TAG_MARK       ((tag_t)4)
#define TAG_FLAGS      ((tag_t)7)
#define TAG_WORD       ((size_t)4)  /* bytes in a header or footer */
#define BLOCK_MIN      ((size_t)16) /* header + two 32-bit links + footer */

static inline tag_t *tag_at(char *p) { return (tag_t *)(void *)p; }
static inline tag_t tag_hdr(char *b) { return *tag_at(b); }
static inline size_t tag_size(char *b) { return tag_hdr(b) & ~TAG_FLAGS; }
static inline int tag_is_alloc(char *b) { return (tag_hdr(b) & TAG_ALLOC) != 0; }
static inline int tag_prev_alloc(char *b) { return (tag_hdr(b) & TAG_PREV_ALLOC) != 0; }
static inline char *tag_next(char *b) { return b + tag_size(b); }
static inline char *tag_footer(char *b) { return b + tag_size(b) - TAG_WORD; }
/* Only valid when the previous block is free (it then has a footer). */
static inline char *tag_prev(char *b) {
  return b - (*tag_at(b - TAG_WORD) & ~TAG_FLAGS);
}
static inline void *tag_payload(char *b) { return b + TAG_WORD; }
static inline char *tag_block_of(void *payload) { return (char *)payload - TAG_WORD; }

/* Set the header, keeping the block's own prev-allocated bit. */
static inline void tag_set(char *b, size_t size, tag_t alloc) {
  *tag_at(b) = (tag_t)size | alloc | (tag_hdr(b) & TAG_PREV_ALLOC);
}
/* The footer copies the header without the prev-allocated bit: that bit
 * changes when the previous block does, and only the header needs it. */
static inline void tag_set_footer(char *b) {
  *tag_at(tag_footer(b)) = tag_hdr(b) & ~TAG_PREV_ALLOC;
}
static inline void tag_set_prev_alloc(char *b, int prev_alloc) {
  if (prev_alloc) *tag_at(b) |= TAG_PREV_ALLOC;
  else *tag_at(b) &= ~TAG_PREV_ALLOC;
}

/* Free-block links: two 32-bit words right after the header. Lists use them as
 * next/prev, the tree as left/right child. Offset 0 means "none". */
static inline tag_t *tag_link0(char *b) { return tag_at(b + TAG_WORD); }
static inline tag_t *tag_link1(char *b) { return tag_at(b + 2 * TAG_WORD); }

#endif
