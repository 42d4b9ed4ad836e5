/* unit_os_hint.c — aligned mappings at a hint (src/os.c, tes_os_map_aligned):
 * a segment-aligned mapping is first tried at the aligned range just below
 * the last one, which the kernel gives when it is free: then the mapping is
 * aligned with one mmap and no trimming munmap. When that range is taken (a
 * blocker mapping of our own), the hint is refused and the mapping is still
 * aligned and correct (over-mapped and trimmed), the blocker untouched, and
 * the hint follows the new mapping; a larger alignment than the last
 * mapping's is kept (the hint is aligned for each call). Sizes above the alignment (huge blocks'
 * segments) take the hint too; page-aligned mappings (heap.c's chunks) never
 * hint or trim. */
#define _GNU_SOURCE
#include "unit_common.h"

#include "internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define MiB ((size_t)1 << 20)
#define ALIGN ((uintptr_t)TES_SEGMENT_SIZE)

/* No page of [addr, addr + size) is mapped (mincore: ENOMEM). */
static bool range_free(uintptr_t addr, size_t size) {
  unsigned char v;
  for (size_t off = 0; off < size; off += 4096)
    if (mincore((void *)(addr + off), 4096, &v) == 0 || errno != ENOMEM) return false;
  return true;
}

static bool aligned(const void *p) { return p != NULL && ((uintptr_t)p & (ALIGN - 1)) == 0; }

int main(void) {
  free(malloc(16)); /* the library's init (page size) */
  tes_os_counters_t c0, c1;

  /* 1. The first mapping sets the hint; the next lands just below it. */
  uint8_t *a = tes_os_map_aligned(1 * MiB, ALIGN);
  REQUIRE(aligned(a), "a 1 MiB mapping aligned to 4 MiB: %p", (void *)a);
  uintptr_t below = (uintptr_t)a - ALIGN;
  REQUIRE(range_free(below, 1 * MiB), "the range below the first mapping is taken: nothing to test");
  tes_os_counters(&c0);
  uint8_t *b = tes_os_map_aligned(1 * MiB, ALIGN);
  tes_os_counters(&c1);
  REQUIRE(aligned(b), "%p", (void *)b);
  CHECK((uintptr_t)b == below, "mapped at the hint %#lx, got %p", (unsigned long)below, (void *)b);
  CHECK(c1.aligned_hint_hits == c0.aligned_hint_hits + 1, "hint hits %llu -> %llu",
        (unsigned long long)c0.aligned_hint_hits, (unsigned long long)c1.aligned_hint_hits);
  CHECK(c1.aligned_trims == c0.aligned_trims, "no trim at the hint: %llu -> %llu",
        (unsigned long long)c0.aligned_trims, (unsigned long long)c1.aligned_trims);
  memset(b, 0xbb, 1 * MiB);

  /* 2. A blocker inside the next hint's range: refused, over-mapped and
   * trimmed, still aligned, the blocker and b untouched. */
  uintptr_t next = (uintptr_t)b - ALIGN;
  uint8_t *blocker = mmap((void *)(next + 64 * 1024), 4096, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  REQUIRE(blocker == (uint8_t *)(next + 64 * 1024), "blocker at %#lx: %p", (unsigned long)(next + 64 * 1024),
          (void *)blocker);
  blocker[0] = 0x5a;
  tes_os_counters(&c0);
  uint8_t *c = tes_os_map_aligned(1 * MiB, ALIGN);
  tes_os_counters(&c1);
  REQUIRE(aligned(c), "refused hint: still aligned (%p)", (void *)c);
  CHECK((uintptr_t)c + 1 * MiB <= (uintptr_t)blocker || (uintptr_t)c >= (uintptr_t)blocker + 4096,
        "c %p overlaps the blocker %p", (void *)c, (void *)blocker);
  CHECK(c1.aligned_hint_hits == c0.aligned_hint_hits, "the blocked hint counted as a hit");
  CHECK(c1.aligned_trims > c0.aligned_trims, "the refused hint's fallback trims (%llu -> %llu)",
        (unsigned long long)c0.aligned_trims, (unsigned long long)c1.aligned_trims);
  memset(c, 0xcc, 1 * MiB);
  CHECK(blocker[0] == 0x5a, "the blocker was replaced");
  CHECK(b[0] == 0xbb && b[1 * MiB - 1] == 0xbb, "b was replaced");
  /* The hint now follows c. */
  uintptr_t below_c = (uintptr_t)c - ALIGN;
  if (range_free(below_c, 1 * MiB)) {
    uint8_t *d = tes_os_map_aligned(1 * MiB, ALIGN);
    CHECK((uintptr_t)d == below_c, "after a refused hint, below the new mapping %#lx: %p", (unsigned long)below_c,
          (void *)d);
    tes_os_unmap(d, 1 * MiB);
  }

  /* 3. Larger than the alignment: the hint is the aligned start that ends at
   * or below the last mapping. */
  uint8_t *e = tes_os_map_aligned(9 * MiB, ALIGN);
  REQUIRE(aligned(e), "%p", (void *)e);
  uintptr_t below_e = ((uintptr_t)e - 9 * MiB) & ~(ALIGN - 1);
  if (range_free(below_e, 9 * MiB)) {
    tes_os_counters(&c0);
    uint8_t *f = tes_os_map_aligned(9 * MiB, ALIGN);
    tes_os_counters(&c1);
    CHECK((uintptr_t)f == below_e, "9 MiB at the hint %#lx: %p", (unsigned long)below_e, (void *)f);
    CHECK(c1.aligned_trims == c0.aligned_trims, "9 MiB at the hint trimmed");
    memset(f, 0xff, 9 * MiB);
    tes_os_unmap(f, 9 * MiB);
  }

  /* 3b. A larger alignment than the last mapping's: the hint is taken in
   * this call's alignment (an 8 MiB memalign after 4 MiB segments). */
  for (int i = 0; i < 4; i++) {
    uint8_t *h = tes_os_map_aligned(1 * MiB, 2 * ALIGN);
    CHECK(h != NULL && ((uintptr_t)h & (2 * ALIGN - 1)) == 0, "1 MiB aligned to 8 MiB: %p", (void *)h);
    uint8_t *q = tes_os_map_aligned(1 * MiB, ALIGN);
    CHECK(aligned(q), "%p", (void *)q);
    if (h != NULL) tes_os_unmap(h, 1 * MiB);
    if (q != NULL) tes_os_unmap(q, 1 * MiB);
  }

  /* 4. Page-aligned mappings never hint or trim. */
  tes_os_counters(&c0);
  uint8_t *g = tes_os_map_aligned(64 * 1024, 4096);
  tes_os_counters(&c1);
  REQUIRE(g != NULL, "64 KiB page-aligned");
  CHECK(c1.aligned_hint_hits == c0.aligned_hint_hits && c1.aligned_trims == c0.aligned_trims,
        "a page-aligned mapping hinted or trimmed");
  tes_os_unmap(g, 64 * 1024);

  /* 5. Through malloc: large blocks of fresh segments (none cached to
   * reuse, all live) are mapped mostly at the hint. */
  enum { BLOCKS = 16 };
  void *blocks[BLOCKS];
  tes_os_counters(&c0);
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(1200 * 1024);
    REQUIRE(blocks[i] != NULL, "malloc(1200 KiB)");
    memset(blocks[i], i, 1200 * 1024);
  }
  tes_os_counters(&c1);
  CHECK(c1.aligned_hint_hits - c0.aligned_hint_hits >= BLOCKS / 2, "%llu of %d fresh large segments at the hint",
        (unsigned long long)(c1.aligned_hint_hits - c0.aligned_hint_hits), BLOCKS);
  for (int i = 0; i < BLOCKS; i++) {
    CHECK(((uint8_t *)blocks[i])[1200 * 1024 - 1] == (uint8_t)i, "block %d overwritten", i);
    free(blocks[i]);
  }

  tes_os_unmap(e, 9 * MiB);
  tes_os_unmap(c, 1 * MiB);
  tes_os_unmap(b, 1 * MiB);
  tes_os_unmap(a, 1 * MiB);
  munmap(blocker, 4096);
  return unit_finish("unit_os_hint");
}
