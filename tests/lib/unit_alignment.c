/* unit_alignment.c — every power-of-two alignment from 1 to
 * TES_MAX_ALIGNMENT, for many sizes, through aligned_alloc, posix_memalign
 * and memalign: the pointer is aligned, the usable size covers the request,
 * the whole block is writable and distinct blocks do not overlap; small
 * alignments come from a class that is a multiple of the alignment (no
 * over-allocation beyond the class). */
#include "unit_common.h"

#include "internal.h"

int main(void) {
  static const size_t sizes[] = {0, 1, 8, 15, 16, 17, 24, 40, 64, 100, 255, 256, 257, 1000, 1024, 4000,
                                 4096, 5000, 8192, 9000, 65536, 100000, 131072, 131073, 500000, 2000000};
  size_t checked = 0;
  for (size_t align = 1; align <= TES_MAX_ALIGNMENT; align *= 2) {
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      size_t size = sizes[i];
      if (align >= ((size_t)4 << 20) && size > 100000) continue; /* keep the huge ones quick */
      void *p[3] = {NULL, NULL, NULL};
      p[0] = tes_aligned_alloc(align, size);
      if (tes_posix_memalign(&p[1], align < sizeof(void *) ? sizeof(void *) : align, size) != 0) p[1] = NULL;
      p[2] = tes_memalign(align, size);
      for (int k = 0; k < 3; k++) {
        size_t want_align = (k == 1 && align < sizeof(void *)) ? sizeof(void *) : align;
        if (p[k] == NULL) {
          CHECK(0, "call %d: alignment %zu size %zu failed", k, align, size);
          continue;
        }
        CHECK(((uintptr_t)p[k] & (want_align - 1)) == 0 && ((uintptr_t)p[k] & 15) == 0,
              "call %d: %p not aligned to %zu (size %zu)", k, p[k], want_align, size);
        size_t usable = tes_usable_size(p[k]);
        CHECK(usable >= size, "call %d: usable %zu < size %zu", k, usable, size);
        if (size <= TES_MEDIUM_BLOCK_MAX && align <= TES_MEDIUM_BLOCK_MAX && align > 16) {
          /* A class that is a multiple of the alignment, and the smallest such. */
          size_t need = size > align ? size : align;
          unsigned c = tes_class_of(need);
          while (tes_class_size(c) % align) c++;
          CHECK(usable == tes_class_size(c), "alignment %zu size %zu: usable %zu, want class %zu", align, size,
                usable, tes_class_size(c));
        }
        memset(p[k], 0xA0 + k, usable < ((size_t)1 << 20) ? usable : ((size_t)1 << 20));
        checked++;
      }
      for (int k = 0; k < 3; k++)
        if (p[k]) {
          unsigned char *b = p[k];
          CHECK(b[0] == 0xA0 + k || size == 0, "block %d overwritten by another", k);
          tes_free(p[k]);
        }
    }
  }
  /* Bad alignments. */
  errno = 0;
  CHECK(tes_aligned_alloc(24, 100) == NULL && errno == EINVAL, "aligned_alloc(24) not EINVAL");
  void *out = (void *)1;
  CHECK(tes_posix_memalign(&out, 4, 100) == EINVAL && out == (void *)1, "posix_memalign(4) not EINVAL");
  CHECK(tes_posix_memalign(&out, 48, 100) == EINVAL, "posix_memalign(48) not EINVAL");
  errno = 0;
  CHECK(tes_aligned_alloc(TES_MAX_ALIGNMENT * 2, 100) == NULL && errno == ENOMEM, "alignment above the maximum");
  /* memalign fails the same way above the maximum (it said EINVAL), and
   * with EINVAL, as glibc, only where no power of two is left. */
  errno = 0;
  CHECK(tes_memalign(TES_MAX_ALIGNMENT * 2, 100) == NULL && errno == ENOMEM, "memalign above the maximum: errno %d",
        errno);
  errno = 0;
  CHECK(tes_memalign(((size_t)1 << 63) + 1, 100) == NULL && errno == EINVAL, "memalign(2^63 + 1): errno %d", errno);
  printf("%zu aligned blocks checked\n", checked);
  return unit_finish("unit_alignment");
}
