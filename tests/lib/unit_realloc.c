/* unit_realloc.c — realloc's cases (src/alloc.c, large.c): in place while
 * the class still fits (and the block is not mostly empty), moving to a
 * smaller class when shrinking below half, growing across classes, small ->
 * large -> huge (mremap) -> small, realloc(NULL, n) and realloc(p, 0), with
 * the contents kept every time and the in-place counter exact. */
#include "unit_common.h"

#include "internal.h"

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31 + seed);
}
static size_t verify(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(i * 31 + seed)) return i;
  return SIZE_MAX;
}

int main(void) {
  tes_stats_t s0, s1;
  /* In place within the class. */
  unsigned char *p = tes_malloc(100); /* 112-byte class */
  fill(p, 100, 1);
  tes_stats_get(&s0);
  unsigned char *q = tes_realloc(p, 112);
  unsigned char *r = tes_realloc(q, 60);
  tes_stats_get(&s1);
  CHECK(q == p && r == p, "realloc within the 112-byte class moved (%p %p %p)", (void *)p, (void *)q, (void *)r);
  CHECK(s1.realloc_in_place - s0.realloc_in_place == 2, "realloc_in_place +%lu, want 2",
        (unsigned long)(s1.realloc_in_place - s0.realloc_in_place));
  CHECK(verify(r, 60, 1) == SIZE_MAX, "contents lost in place");

  /* Shrinking below half moves to a smaller class. */
  unsigned char *s = tes_realloc(r, 20);
  CHECK(s != r && tes_usable_size(s) == 32, "shrink 112 -> 20: usable %zu", tes_usable_size(s));
  CHECK(verify(s, 20, 1) == SIZE_MAX, "contents lost on shrink");

  /* Growing across classes, then to large, huge, and back to small. */
  size_t steps[] = {200, 1000, 5000, 100000, 131072, 131073, 1 << 20, (size_t)12 << 20, 3000, 10};
  size_t have = 20;
  unsigned char *b = s;
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    size_t keep = have < steps[i] ? have : steps[i];
    unsigned char *n = tes_realloc(b, steps[i]);
    REQUIRE(n != NULL, "realloc to %zu", steps[i]);
    CHECK(verify(n, keep < 20 ? keep : 20, 1) == SIZE_MAX, "prefix lost at %zu", steps[i]);
    CHECK(tes_usable_size(n) >= steps[i], "usable %zu < %zu", tes_usable_size(n), steps[i]);
    fill(n, steps[i], 1);
    b = n;
    have = steps[i];
  }
  tes_free(b);

  /* realloc(NULL, n) allocates; realloc(p, 0) frees and returns NULL. */
  void *a = tes_realloc(NULL, 50);
  CHECK(a != NULL && tes_usable_size(a) >= 50, "realloc(NULL, 50)");
  CHECK(tes_realloc(a, 0) == NULL, "realloc(p, 0) did not return NULL");
  /* reallocarray overflow. */
  void *c = tes_malloc(10);
  errno = 0;
  CHECK(tes_reallocarray(c, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM, "reallocarray overflow");
  CHECK(tes_usable_size(c) >= 10, "reallocarray overflow freed the block");
  tes_free(c);
  return unit_finish("unit_realloc");
}
