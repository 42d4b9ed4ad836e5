/* override.c — the standard C allocation names in the static drop-in
 * archives (libtessera.a and the fault-injection ones).
 *
 * The shared libraries give these names to alloc.c's tes_* functions as
 * aliases (TES_STANDARD_ALIASES; one copy of each fast path in the text
 * every process maps: PERFORMANCE.md, txt27), and this file is empty there.
 * In an archive they must stay an object of their own, pulled only by a
 * program that calls one of them: as aliases they would come with
 * tes_malloc, and a program that calls only tes_* would have its C
 * library's internal mallocs (which go through the executable's malloc)
 * served by the allocator too (lib.unit_page_exit counts every block).
 *
 * malloc and free inline the fast paths themselves (no extra call between
 * the program and the allocator); the other names forward to the tes_*
 * functions of alloc.c, and glibc's __libc_* entry points (used by some
 * programs and by glibc's own internals) are aliases. Left out of
 * tessera_nooverride. */
#include "alloc_inline.h"

#if !TES_STANDARD_ALIASES

#define EXPORT __attribute__((visibility("default")))

void *tes_calloc_in(tes_heap_t *heap, size_t count, size_t size);
void *tes_realloc_in(tes_heap_t *heap, void *p, size_t size);

EXPORT void *malloc(size_t size) { return tes_malloc_inline(tes_tls_heap, size); }
EXPORT void free(void *p) { tes_free_inline(p); }
EXPORT void *calloc(size_t count, size_t size) { return tes_calloc_in(tes_tls_heap, count, size); }
EXPORT void *realloc(void *p, size_t size) { return tes_realloc_in(tes_tls_heap, p, size); }
EXPORT void *reallocarray(void *p, size_t count, size_t size) { return tes_reallocarray(p, count, size); }
EXPORT void *aligned_alloc(size_t alignment, size_t size) { return tes_aligned_alloc(alignment, size); }
EXPORT int posix_memalign(void **out, size_t alignment, size_t size) {
  return tes_posix_memalign(out, alignment, size);
}
EXPORT void *memalign(size_t alignment, size_t size) { return tes_memalign(alignment, size); }
EXPORT void *valloc(size_t size) { return tes_valloc(size); }
EXPORT void *pvalloc(size_t size) { return tes_pvalloc(size); }
EXPORT size_t malloc_usable_size(void *p) { return tes_usable_size_inline(p); }
EXPORT void free_sized(void *p, size_t size) {
  (void)size;
  tes_free_inline(p);
}
EXPORT void free_aligned_sized(void *p, size_t alignment, size_t size) {
  (void)alignment;
  (void)size;
  tes_free_inline(p);
}
EXPORT void cfree(void *p) { tes_free_inline(p); }

/* For override_new.cpp's operator new and delete (hidden: no PLT hop). */
void *tes_cxx_malloc(size_t size);
void tes_cxx_free(void *p);
void *tes_cxx_malloc(size_t size) { return tes_malloc_inline(tes_tls_heap, size); }
void tes_cxx_free(void *p) { tes_free_inline(p); }

/* glibc's internal names. */
EXPORT void *__libc_malloc(size_t size) __attribute__((alias("malloc")));
EXPORT void __libc_free(void *p) __attribute__((alias("free")));
EXPORT void *__libc_calloc(size_t count, size_t size) __attribute__((alias("calloc")));
EXPORT void *__libc_realloc(void *p, size_t size) __attribute__((alias("realloc")));
EXPORT void *__libc_memalign(size_t alignment, size_t size) __attribute__((alias("memalign")));
EXPORT void *__libc_valloc(size_t size) __attribute__((alias("valloc")));
EXPORT void *__libc_pvalloc(size_t size) __attribute__((alias("pvalloc")));
EXPORT void *__libc_reallocarray(void *p, size_t count, size_t size) __attribute__((alias("reallocarray")));

#endif /* !TES_STANDARD_ALIASES */
