/* fit_freemap.h — a side bitmap of the free blocks' edges, beside the heap,
 * so free() learns whether its physical neighbours are free by testing two
 * bits instead of reading their headers. Used by the bf_ arena (fast best
 * fit) only; the other arenas keep the header tests of fit_arena.h.
 *
 * Why: after the second pass, bf_free's time was two or three dependent
 * cache misses: its own header, then its successor's (to see whether to
 * coalesce), then maybe its predecessor's. The map is 1/128 of the heap
 * (one bit per 16-byte granule: 27 KiB for the small-range workload's
 * 3.4 MiB, so it stays in L1/L2), and the successor's header is only read
 * when there is something to coalesce.
 *
 * Encoding: for every free block in the arena's index, the bit of its first
 * granule and the bit of its last granule are set; every other bit is clear.
 * A free block is at least FIT_MIN_BLOCK (three granules), so the two never
 * coincide, and:
 *  - the successor of block [s, e) is free iff bit(e) is set (bit e could
 *    only be another free block's last granule if that block contained e);
 *  - its predecessor is free iff bit(s - 1) is set.
 * Granules outside the arena's runs (run records, other arenas' memory, the
 * C library's) are never set, so no test looks across a run boundary.
 * The bits are maintained where blocks enter and leave the index
 * (fit_size_index.h), so the map and the index agree by construction; the
 * checker (fit_check.c) verifies it.
 *
 * Memory: one reservation of address space (PROT_NONE: costs nothing and
 * RLIMIT_DATA does not count it) made read-write as the arena's memory
 * grows (fit_brk.c calls fit_freemap_cover before sbrk); it never moves. It
 * is outside the data segment, so get_data_segment_size does not count it;
 * docs/LAB.md (section fit) reports it beside the results.
 */
#ifndef TESSERA_FIT_FREEMAP_H
#define TESSERA_FIT_FREEMAP_H

#include <stddef.h>
#include <stdint.h>

/* Heap bytes the reservation covers above its base (the largest block is
 * 64 GiB anyway, FIT_MAX_BLOCK): 512 MiB of address space. */
#define FIT_FREEMAP_COVER ((size_t)64 << 30)

typedef struct fit_freemap {
  char *base;     /* heap address of bit 0; NULL until the first cover */
  uint64_t *bits; /* reserved for FIT_FREEMAP_COVER / 16 bits */
  size_t words;   /* words made read-write so far */
} fit_freemap_t;

static inline size_t fit_freemap_granule(const fit_freemap_t *m, const void *p) {
  return (size_t)((const char *)p - m->base) / 16u;
}

static inline int fit_freemap_test(const fit_freemap_t *m, size_t g) { return (int)((m->bits[g >> 6] >> (g & 63)) & 1); }

static inline void fit_freemap_set_edges(fit_freemap_t *m, const void *block, size_t size) {
  size_t g = fit_freemap_granule(m, block), last = g + size / 16u - 1;
  m->bits[g >> 6] |= (uint64_t)1 << (g & 63);
  m->bits[last >> 6] |= (uint64_t)1 << (last & 63);
}

static inline void fit_freemap_clear_edges(fit_freemap_t *m, const void *block, size_t size) {
  size_t g = fit_freemap_granule(m, block), last = g + size / 16u - 1;
  m->bits[g >> 6] &= ~((uint64_t)1 << (g & 63));
  m->bits[last >> 6] &= ~((uint64_t)1 << (last & 63));
}

/* Makes the map cover heap addresses [lo, end] (reserving it at the first
 * call, with its base at lo's KiB). 0, or -1 with errno=ENOMEM when the range
 * is outside the reservation or the kernel refuses (RLIMIT_DATA). */
int fit_freemap_cover(fit_freemap_t *m, const char *lo, const char *end);

#endif
