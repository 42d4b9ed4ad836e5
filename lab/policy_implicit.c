/* policy_implicit: the implicit free list, CS:APP chapter 9 style.
 *
 * There is no free list at all: the "index" is the heap itself, walked block
 * by block through the boundary tags. Every block has a header and a footer,
 * coalescing is immediate, and the heap grows by exactly the block asked for.
 * Three placement rules:
 *   implicit-first  the first free block that fits, from the heap start;
 *   implicit-next   the same, but resuming where the last search stopped
 *                   (the rover);
 *   implicit-best   the smallest free block that fits (whole-heap scan,
 *                   stopping early on an exact fit).
 * Invariant specific to this file: the rover is NULL or the start of a block
 * (a block merged into its neighbour moves the rover to the merged block).
 * Called through the lab_policy_t objects listed in policy_registry.c. */
#include "heap_core.h"
#include "policy_families.h"

static char *rover; /* next fit: where the next search starts (NULL: heap start) */
static char *found; /* the block idx_find just returned, about to be allocated */

static void idx_init(core_cfg_t cfg) {
  (void)cfg;
  rover = found = NULL;
}

CORE_INLINE void idx_insert(core_cfg_t cfg, char *b) {
  (void)cfg;
  /* A merge may have swallowed the rover's block: point at the merged one. */
  if (rover > b && rover < b + tag_size(b)) rover = b;
}

CORE_INLINE void idx_remove(core_cfg_t cfg, char *b) {
  (void)cfg;
  /* The block just found stays a block start (it is allocated at its
   * bottom), so the rover may keep pointing at it; any other block leaving
   * the free set may be absorbed into a neighbour, so the rover lets go. */
  if (b == found) {
    found = NULL;
    return;
  }
  if (rover == b) rover = NULL;
}

static char *implicit_scan(char *from, char *to, size_t asize) {
  for (char *b = from; b != to; b = tag_next(b))
    if (!tag_is_alloc(b) && tag_size(b) >= asize) return b;
  return NULL;
}

CORE_INLINE char *idx_find(core_cfg_t cfg, size_t asize) {
  if (cfg.fit == FIT_FIRST) return implicit_scan(core_first, core_epi, asize);
  if (cfg.fit == FIT_NEXT) {
    char *start = rover ? rover : core_first;
    char *b = implicit_scan(start, core_epi, asize);
    if (!b) b = implicit_scan(core_first, start, asize);
    rover = found = b;
    return b;
  }
  char *best = NULL;
  size_t best_size = SIZE_MAX;
  for (char *b = core_first; b != core_epi; b = tag_next(b)) {
    size_t size = tag_size(b);
    if (!tag_is_alloc(b) && size >= asize && size < best_size) {
      best = b;
      best_size = size;
      if (size == asize) break;
    }
  }
  return best;
}

static int idx_check(core_cfg_t cfg, char *err, size_t errlen, size_t *count) {
  (void)cfg;
  (void)err;
  (void)errlen;
  (void)count;
  return 0;
}

static int implicit_check(core_cfg_t cfg, char *err, size_t errlen) {
  if (core_check(cfg, 0, err, errlen) != 0) return -1;
  if (rover) {
    char *b = core_first;
    while (b != core_epi && b != rover) b = tag_next(b);
    if (b != rover)
      CORE_FAIL("next-fit rover at offset %zu is not a block start", core_heap_off(rover));
  }
  return 0;
}

/* One lab_policy_t per configuration; the configuration is a compile-time
 * constant so each wrapper is specialised code. */
#define IMPLICIT_POLICY(ident, pname, desc, ...) \
  CORE_DEFINE_POLICY(ident, pname, desc, implicit_check, __VA_ARGS__)

IMPLICIT_POLICY(lab_policy_implicit_first, "implicit-first",
                "implicit list, header+footer, first fit, immediate coalescing",
                .fit = FIT_FIRST)
IMPLICIT_POLICY(lab_policy_implicit_next, "implicit-next",
                "implicit list, header+footer, next fit (roving pointer)",
                .fit = FIT_NEXT)
IMPLICIT_POLICY(lab_policy_implicit_best, "implicit-best",
                "implicit list, header+footer, best fit (whole-heap scan)",
                .fit = FIT_BEST)
