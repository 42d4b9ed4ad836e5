/* size_class.h — the size-class geometry of libtessera.
 *
 * Classes 0..15 are 16, 32, ..., 256 bytes (exact 16-byte steps, waste < 16
 * bytes); above 256 there are four classes per power of two:
 *   2^b + j * 2^(b-2), j = 1..4   (320, 384, 448, 512, 640, ... 128 KiB)
 * so a block wastes at most 25% of a request above 256 bytes (worst case:
 * request 2^b + 1 gets 2^b + 2^(b-2); e.g. 257 -> 320, waste 63/320 < 20%
 * of the block, 63/257 < 25% of the request). Every class above 256 bytes
 * of the form 2^(b-2) * (4 + j) is a multiple of 2^(b-2), and every power of
 * two is itself a class: that is what makes aligned allocation cheap
 * (a class whose size is a multiple of the alignment, in a page whose block
 * area is aligned to the page size; see alloc.c).
 *
 * Classes up to TES_SMALL_BLOCK_MAX live in 64 KiB small pages, classes up
 * to TES_MEDIUM_BLOCK_MAX in 512 KiB medium pages; larger requests are
 * "large" blocks with their own segment (large.c). */
#ifndef TES_SIZE_CLASS_H
#define TES_SIZE_CLASS_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define TES_CLASS_COUNT 52
#define TES_SMALL_BLOCK_MAX ((size_t)8 * 1024)     /* largest class in small pages */
#define TES_MEDIUM_BLOCK_MAX ((size_t)128 * 1024)  /* largest class of all */
#define TES_DIRECT_MAX ((size_t)1024)              /* sizes served by the direct table */
#define TES_DIRECT_COUNT (TES_DIRECT_MAX / 16 + 1) /* direct[(size + 15) / 16] */

/* Block size of class c, as a constant expression. */
#define TES_CLASS_SIZE_EXPR(c)                                                \
  ((c) < 16 ? (size_t)16 * ((c) + 1)                                          \
            : ((size_t)1 << (8 + ((c)-16) / 4)) +                             \
                  (size_t)(((c)-16) % 4 + 1) * ((size_t)1 << (6 + ((c)-16) / 4)))

static_assert(TES_CLASS_SIZE_EXPR(0) == 16, "first class is 16 bytes");
static_assert(TES_CLASS_SIZE_EXPR(15) == 256, "16-byte steps end at 256");
static_assert(TES_CLASS_SIZE_EXPR(16) == 320, "then four classes per power of two");
static_assert(TES_CLASS_SIZE_EXPR(TES_CLASS_COUNT - 1) == TES_MEDIUM_BLOCK_MAX,
              "the last class is the medium limit");
static_assert(TES_CLASS_COUNT <= 128, "fits tes_stats_t.class_* arrays");

extern const uint32_t tes_class_sizes[TES_CLASS_COUNT];

/* The class of direct-table index i = (size + 15) / 16, as a constant
 * expression (tes_class_of(16 * i), for tables built at compile time). */
#define TES_CLASS_ABOVE_256_EXPR(s)                                               \
  (16u + (63u - (unsigned)__builtin_clzl((s)-1) - 8u) * 4u +                      \
   (unsigned)((((s)-1) >> (63u - (unsigned)__builtin_clzl((s)-1) - 2u)) & 3u))
#define TES_DIRECT_CLASS_EXPR(i) ((i) <= 1 ? 0u : (i) <= 16 ? (unsigned)(i)-1 : TES_CLASS_ABOVE_256_EXPR((size_t)(i)*16))

/* The smallest class whose block holds `size` bytes (size <= TES_MEDIUM_BLOCK_MAX). */
/* The same for 256 < size <= TES_MEDIUM_BLOCK_MAX (the medium fast path). */
static inline unsigned tes_class_of_above_256(size_t size) {
  size_t w = size - 1;
  unsigned b = 63u - (unsigned)__builtin_clzl(w); /* 2^b <= w < 2^(b+1) */
  unsigned j = (unsigned)(w >> (b - 2)) & 3u;
  return 16u + (b - 8u) * 4u + j;
}
static inline unsigned tes_class_of(size_t size) {
  if (size <= 256) return size <= 16 ? 0 : (unsigned)((size + 15) >> 4) - 1;
  return tes_class_of_above_256(size);
}

static inline size_t tes_class_size(unsigned c) { return tes_class_sizes[c]; }

/* Bytes the hardened build adds to every small/medium request (its canary
 * and delta words, internal.h), so its class boundaries sit this much lower;
 * tests use it to find them. TES_PADDING is 0 in the default build. */
#define TES_SECURE_PADDING 8

#endif
