/* unit_size_class.c — the size-class geometry (src/size_class.h):
 * every size maps to the smallest class that holds it, classes ascend in
 * multiples of 16, the documented waste bounds hold (< 12.5% of a request
 * between 1 and 8 KiB, eight classes a doubling there), every power of two
 * is a class, the page-end slack is bounded, and the direct table of the
 * malloc fast path and the medium path's group table agree with
 * tes_class_of for every size they serve. */
#include "unit_common.h"

#include "internal.h"

int main(void) {
  /* Classes ascend, are multiples of 16, and end at the medium limit. */
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    CHECK(tes_class_size(c) % 16 == 0, "class %u size %zu", c, tes_class_size(c));
    if (c > 0) CHECK(tes_class_size(c) > tes_class_size(c - 1), "class %u not ascending", c);
  }
  CHECK(tes_class_size(TES_CLASS_COUNT - 1) == TES_MEDIUM_BLOCK_MAX, "last class %zu",
        tes_class_size(TES_CLASS_COUNT - 1));

  /* Every size maps to the smallest fitting class; waste is bounded. */
  for (size_t size = 0; size <= TES_MEDIUM_BLOCK_MAX; size++) {
    unsigned c = tes_class_of(size);
    REQUIRE(c < TES_CLASS_COUNT, "size %zu -> class %u", size, c);
    size_t bs = tes_class_size(c);
    if (bs < size || (c > 0 && tes_class_size(c - 1) >= size && size > 0)) {
      CHECK(0, "size %zu -> class %u (%zu bytes), previous class %zu", size, c, bs,
            c ? tes_class_size(c - 1) : 0);
      break;
    }
    if (size <= 256) CHECK(bs - size < 16 || size == 0, "size %zu wastes %zu bytes", size, bs - size);
    else if ((bs - size) * 4 >= size) {
      CHECK(0, "size %zu wastes %zu bytes (>= 25%%)", size, bs - size);
      break;
    }
    /* 1 KiB < size <= 8 KiB: eighths of a power of two, waste < 12.5%. */
    if (size > 1024 && size <= TES_SMALL_BLOCK_MAX && (bs - size) * 8 >= size) {
      CHECK(0, "size %zu wastes %zu bytes (>= 12.5%%)", size, bs - size);
      break;
    }
    /* The compile-time form (direct bin table) and the medium fast path's
     * group table give the same class. */
    if (size > 256 && (TES_CLASS_ABOVE_256_EXPR(size) != c || tes_class_of_above_256(size) != c)) {
      CHECK(0, "size %zu: class %u, expression %u, groups %u", size, c, TES_CLASS_ABOVE_256_EXPR(size),
            tes_class_of_above_256(size));
      break;
    }
  }
  /* sqlite's buffers (1,024 and 4,096 bytes plus its 8-byte header, and its
   * 4,360-byte cache pages plus 8): 1,152 and 4,608-byte blocks, not 1,280
   * and 5,120 (PERFORMANCE.md, twentieth session). */
  CHECK(tes_class_size(tes_class_of(1032)) == 1152, "1,032 B -> %zu", tes_class_size(tes_class_of(1032)));
  CHECK(tes_class_size(tes_class_of(4104)) == 4608, "4,104 B -> %zu", tes_class_size(tes_class_of(4104)));
  CHECK(tes_class_size(tes_class_of(4368)) == 4608, "4,368 B -> %zu", tes_class_size(tes_class_of(4368)));

  /* Every power of two from 16 to the medium limit is exactly a class. */
  for (size_t p = 16; p <= TES_MEDIUM_BLOCK_MAX; p *= 2)
    CHECK(tes_class_size(tes_class_of(p)) == p, "power of two %zu is not a class", p);

  /* A class above 256 bytes is a multiple of a quarter of its power of two:
   * an aligned request finds a class that is a multiple of its alignment. */
  for (size_t a = 32; a <= TES_MEDIUM_BLOCK_MAX; a *= 2) {
    unsigned c = tes_class_of(a);
    while (c < TES_CLASS_COUNT && tes_class_size(c) % a) c++;
    CHECK(c < TES_CLASS_COUNT && tes_class_size(c) == a, "alignment %zu: first multiple class %zu", a,
          c < TES_CLASS_COUNT ? tes_class_size(c) : 0);
  }

  /* Small pages hold >= 8 blocks, medium pages >= 4. */
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    size_t bs = tes_class_size(c);
    size_t page = bs <= TES_SMALL_BLOCK_MAX ? ((size_t)1 << TES_SMALL_PAGE_SHIFT) : ((size_t)1 << TES_MEDIUM_PAGE_SHIFT);
    CHECK(page / bs >= (bs <= TES_SMALL_BLOCK_MAX ? 8u : 4u), "class %zu: %zu blocks per page", bs, page / bs);
    /* The unusable end of a page is at most an eighth of it (worst: 112 KiB
     * blocks, 4 in a 512 KiB page; 6,656 B, 9 in 64 KiB, leave 8.6%). */
    CHECK(page % bs * 8 <= page, "class %zu: %zu bytes at the page end", bs, page % bs);
    /* Above 256 bytes a class is a multiple of 64 (aligned allocation). */
    if (bs > 256) CHECK(bs % 64 == 0, "class %zu not a multiple of 64", bs);
  }

  /* The hardened build's division-free block check (secure.c): with
   * reciprocal = 2^40 / bs + 1, (offset * reciprocal) >> 40 == offset / bs
   * for every class and every offset inside a page. */
  for (unsigned c = 0; c < TES_CLASS_COUNT; c++) {
    size_t bs = tes_class_size(c);
    uint64_t reciprocal = ((uint64_t)1 << 40) / bs + 1;
    size_t page = (size_t)1 << TES_MEDIUM_PAGE_SHIFT;
    size_t bad = 0;
    for (size_t offset = 0; offset < page; offset += 16)
      bad += (size_t)((offset * reciprocal) >> 40) != offset / bs;
    CHECK(bad == 0, "class %zu: %zu offsets divide wrongly", bs, bad);
  }

  /* The fast path's direct table index (size + 15) / 16 serves exactly the
   * block size tes_class_of picks, for every size up to TES_DIRECT_MAX. */
  tes_heap_t *heap = tes_heap_new();
  REQUIRE(heap != NULL, "tes_heap_new");
  for (size_t size = 0; size <= TES_DIRECT_MAX; size++) {
    void *p = tes_heap_malloc(heap, size);
    REQUIRE(p != NULL, "tes_heap_malloc(%zu)", size);
    size_t want = tes_class_size(tes_class_of(size));
    if (tes_usable_size(p) != want) {
      CHECK(0, "size %zu: usable %zu, class %zu", size, tes_usable_size(p), want);
      break;
    }
    /* The page now at the head of that class is what the direct entry shows. */
    tes_page_t *page = heap->direct[(size + 15) >> 4];
    CHECK(page->block_size == want, "direct[%zu] serves %zu-byte blocks, want %zu", (size + 15) >> 4,
          page->block_size, want);
  }
  tes_heap_destroy(heap);
  /* The compile-time class of each direct index (the heaps' bin table)
   * agrees with tes_class_of for every size that index covers. */
  for (size_t size = 0; size <= TES_DIRECT_MAX; size++) {
    size_t i = (size + 15) / 16;
    CHECK(TES_DIRECT_CLASS_EXPR(i) == tes_class_of(size == 0 ? 1 : size),
          "direct index %zu (size %zu): class %u, tes_class_of says %u", i, size, TES_DIRECT_CLASS_EXPR(i),
          tes_class_of(size == 0 ? 1 : size));
  }
  return unit_finish("unit_size_class");
}
