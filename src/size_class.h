/* size_class.h — the size-class geometry of libtessera.
 *
 * Classes 0..15 are 16, 32, ..., 256 bytes (exact 16-byte steps, waste < 16
 * bytes). Above 256 each power of two 2^b is split in equal steps,
 *   2^b + j * 2^(b-s), j = 1..2^s,
 * with s = 3 (eight classes a doubling) for 1 KiB < size <= 8 KiB and s = 2
 * (four) elsewhere:
 *   320, 384, 448, 512, 640, ... 1,024                       (quarters)
 *   1,152, 1,280, ... 2,048, 2,304, ... 4,096, 4,608, ... 8,192 (eighths)
 *   10,240, 12,288, ... 128 KiB                               (quarters)
 * so a block wastes less than 25% of a request above 256 bytes (worst case:
 * request 2^b + 1 gets 2^b + 2^(b-2); e.g. 257 -> 320) and less than 12.5%
 * between 1 and 8 KiB (1,025 -> 1,152; sqlite's 1,032- and 4,368-byte
 * buffers get 1,152 and 4,608 instead of 1,280 and 5,120: PERFORMANCE.md,
 * twentieth session). Every class above 256 bytes, 2^(b-s) * (2^s + j), is
 * a multiple of 2^(b-s) >= 64, and every power of two is itself a class:
 * that is what makes aligned allocation cheap (a class whose size is a
 * multiple of the alignment, in a page whose block area is aligned to the
 * page size; see alloc.c). The classes number 16 + 2 * 4 + 3 * 8 + 4 * 4 = 64.
 *
 * Classes up to TES_SMALL_BLOCK_MAX live in 64 KiB small pages, classes up
 * to TES_MEDIUM_BLOCK_MAX in 512 KiB medium pages; larger requests are
 * "large" blocks with their own segment (large.c). */
#ifndef TES_SIZE_CLASS_H
#define TES_SIZE_CLASS_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define TES_CLASS_COUNT 64
#define TES_SMALL_BLOCK_MAX ((size_t)8 * 1024)     /* largest class in small pages */
#define TES_MEDIUM_BLOCK_MAX ((size_t)128 * 1024)  /* largest class of all */
#define TES_DIRECT_MAX ((size_t)1024)              /* sizes served by the direct table */
#define TES_DIRECT_COUNT (TES_DIRECT_MAX / 16 + 1) /* direct[(size + 15) / 16] */

/* Block size of class c, as a constant expression: 16-byte steps, then the
 * groups of 2^s equal steps above each power of two 2^b (b = 8, 9: s = 2;
 * b = 10, 11, 12: s = 3; b = 13 .. 16: s = 2), whose first classes are 16,
 * 24, 48. */
#define TES_CLASS_OFF_(c, first) ((c) < (first) ? 0 : (c) - (first))
#define TES_CLASS_STEP_(b, s, j) (((size_t)1 << (b)) + (size_t)(j) * ((size_t)1 << ((b) - (s))))
#define TES_CLASS_SIZE_EXPR(c)                                                                         \
  ((c) < 16   ? (size_t)16 * ((c) + 1)                                                                 \
   : (c) < 24 ? TES_CLASS_STEP_(8 + TES_CLASS_OFF_(c, 16) / 4, 2, TES_CLASS_OFF_(c, 16) % 4 + 1)       \
   : (c) < 48 ? TES_CLASS_STEP_(10 + TES_CLASS_OFF_(c, 24) / 8, 3, TES_CLASS_OFF_(c, 24) % 8 + 1)      \
              : TES_CLASS_STEP_(13 + TES_CLASS_OFF_(c, 48) / 4, 2, TES_CLASS_OFF_(c, 48) % 4 + 1))

static_assert(TES_CLASS_SIZE_EXPR(0) == 16, "first class is 16 bytes");
static_assert(TES_CLASS_SIZE_EXPR(15) == 256, "16-byte steps end at 256");
static_assert(TES_CLASS_SIZE_EXPR(16) == 320, "then four classes per power of two");
static_assert(TES_CLASS_SIZE_EXPR(23) == 1024 && TES_CLASS_SIZE_EXPR(24) == 1152, "eight from 1 KiB");
static_assert(TES_CLASS_SIZE_EXPR(47) == 8192 && TES_CLASS_SIZE_EXPR(48) == 10240, "four again from 8 KiB");
static_assert(TES_CLASS_SIZE_EXPR(TES_CLASS_COUNT - 1) == TES_MEDIUM_BLOCK_MAX,
              "the last class is the medium limit");
static_assert(TES_CLASS_COUNT <= 128, "fits tes_stats_t.class_* arrays");

extern const uint32_t tes_class_sizes[TES_CLASS_COUNT];

/* The class of 256 < s <= TES_MEDIUM_BLOCK_MAX, as a constant expression:
 * with w = s - 1 and 2^b <= w < 2^(b+1), the group's first class plus the
 * step j - 1 = (w >> (b - s)) - 2^s. */
#define TES_LOG2_EXPR(w) (63u - (unsigned)__builtin_clzl(w))
#define TES_CLASS_EIGHTHS_(b) ((unsigned)((b)-10u) < 3u) /* 1 KiB < size <= 8 KiB: s = 3 */
#define TES_CLASS_MIN_(x, y) ((x) < (y) ? (x) : (y))
#define TES_CLASS_FIRST_EXPR(b) /* the first class of group b (8 <= b <= 16) */ \
  (16u + ((b)-8u) * 4u + (TES_CLASS_MIN_(b, 13u) - TES_CLASS_MIN_(b, 10u)) * 4u)
#define TES_CLASS_SHIFT_EXPR(b) ((b)-2u - TES_CLASS_EIGHTHS_(b)) /* b - s */
#define TES_CLASS_ABOVE_256_EXPR(s)                                                                  \
  (TES_CLASS_FIRST_EXPR(TES_LOG2_EXPR((s)-1)) +                                                      \
   (unsigned)(((s)-1) >> TES_CLASS_SHIFT_EXPR(TES_LOG2_EXPR((s)-1))) - (4u << TES_CLASS_EIGHTHS_(TES_LOG2_EXPR((s)-1))))
/* The class of direct-table index i = (size + 15) / 16 (tes_class_of(16 * i),
 * for tables built at compile time). */
#define TES_DIRECT_CLASS_EXPR(i) ((i) <= 1 ? 0u : (i) <= 16 ? (unsigned)(i)-1 : TES_CLASS_ABOVE_256_EXPR((size_t)(i)*16))

/* The medium fast path's form of the same: one 16-bit entry per b, the
 * shift b - s in the low byte and the group's first class minus 2^s in the
 * high byte (size_class.c), so class = (w >> shift) + high byte. */
#define TES_CLASS_GROUP_EXPR(b) \
  ((uint16_t)(TES_CLASS_SHIFT_EXPR(b) | ((TES_CLASS_FIRST_EXPR(b) - (4u << TES_CLASS_EIGHTHS_(b))) << 8)))
extern const uint16_t tes_class_groups[17];

/* The smallest class whose block holds `size` bytes (size <= TES_MEDIUM_BLOCK_MAX). */
/* The same for 256 < size <= TES_MEDIUM_BLOCK_MAX (the medium fast path). */
static inline unsigned tes_class_of_above_256(size_t size) {
  size_t w = size - 1;
  unsigned g = tes_class_groups[63u - (unsigned)__builtin_clzl(w)]; /* 2^b <= w < 2^(b+1) */
  return (unsigned)(w >> (g & 63u)) + (g >> 8);
}
static inline unsigned tes_class_of(size_t size) {
  if (size <= 256) return size <= 16 ? 0 : (unsigned)((size + 15) >> 4) - 1;
  return tes_class_of_above_256(size);
}

static inline size_t tes_class_size(unsigned c) { return tes_class_sizes[c]; }

/* Classes a doubling around class c: 8 for 1 KiB < size <= 8 KiB (classes
 * 24..47), else 4 (taken as 4 for the 16-byte steps too). Per-class
 * budgets that should stay the same per range of sizes divide by it. */
#define TES_MEDIUM_CLASS_FIRST 48u /* the first class above TES_SMALL_BLOCK_MAX */
static_assert(TES_CLASS_SIZE_EXPR(TES_MEDIUM_CLASS_FIRST - 1) == TES_SMALL_BLOCK_MAX, "classes 48.. are medium");
#define TES_CLASS_EIGHTHS_FIRST 24u
#define TES_CLASS_EIGHTHS_END 48u
static_assert(TES_CLASS_SIZE_EXPR(TES_CLASS_EIGHTHS_FIRST) == 1152 && TES_CLASS_SIZE_EXPR(TES_CLASS_EIGHTHS_END) == 10240,
              "the eighths are classes 24..47");
static inline unsigned tes_class_steps(unsigned c) {
  return c - TES_CLASS_EIGHTHS_FIRST < TES_CLASS_EIGHTHS_END - TES_CLASS_EIGHTHS_FIRST ? 8u : 4u;
}

/* Bytes the hardened build adds to every small/medium request (its canary
 * and delta words, internal.h), so its class boundaries sit this much lower;
 * tests use it to find them. TES_PADDING is 0 in the default build. */
#define TES_SECURE_PADDING 8

#endif
