/* Workload `aligned`: a pool of 1,000 live blocks replaced at random, each
 * from posix_memalign or aligned_alloc with an alignment drawn from every
 * power of two from 16 B to 64 KiB (1 in 64 up to 1 MiB) and a size of
 * 8 B-16 KiB. Every result is checked for its alignment: a misaligned block
 * is a failure of the allocator (PITFALLS #14). Peak RSS shows how much an
 * allocator over-allocates to align. */
#include "wl_common.h"

#define SLOTS 1000

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "aligned: posix_memalign/aligned_alloc, alignments 16 B-1 MiB, checked");
  long steps = wl_scaled(&o, 1000000L, 1000);
  static void *slot[SLOTS];
  uint64_t rng = o.seed;
  double t0 = wl_now();
  for (long s = 0; s < steps; s++) {
    size_t i = (size_t)(wl_rand(&rng) % SLOTS);
    free(slot[i]);
    unsigned shift = (wl_rand(&rng) % 64 == 0) ? (unsigned)wl_rand_range(&rng, 17, 20)
                                               : (unsigned)wl_rand_range(&rng, 4, 16);
    size_t align = (size_t)1 << shift;
    size_t size = wl_rand_log(&rng, 8, 16384);
    void *p = NULL;
    if (s & 1) {
      if (posix_memalign(&p, align, size) != 0) wl_fail("posix_memalign failed");
    } else {
      /* C11 wants size to be a multiple of the alignment for aligned_alloc. */
      p = wl_check(aligned_alloc(align, (size + align - 1) & ~(align - 1)), "aligned_alloc returned NULL");
    }
    if ((uintptr_t)p & (align - 1)) {
      fprintf(stderr, "misaligned: %p for alignment %zu size %zu\n", p, align, size);
      wl_fail("misaligned block");
    }
    *(volatile char *)p = 1;
    slot[i] = p;
  }
  for (int i = 0; i < SLOTS; i++) free(slot[i]);
  wl_report(wl_now() - t0, (double)steps);
  return 0;
}
