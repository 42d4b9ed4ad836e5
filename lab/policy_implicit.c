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
 * The rover follows CS:APP's next fit: a search that finds nothing leaves it
 * where it was (the request is then served by growing the heap), and when
 * the rover's free block merges into the block before it, the rover moves to
 * the merged block. Invariant specific to this file: unless `lost` is set,
 * the rover is NULL or the start of a block; when the rover's block leaves
 * the free set other than by being found, `lost` is set and the rover keeps
 * the address: a merge that covers it points the rover at the merged block,
 * and otherwise (the block was absorbed by a realloc growing in place) the
 * next search starts at the block that now holds that address.
 * Called through the lab_policy_t objects listed in policy_registry.c. */
#include "heap_core.h"
#include "policy_families.h"

/* Per region width (cfg.wide): */
static char *rover[2]; /* next fit: where the next search starts (NULL: region start) */
static char *found[2]; /* the block idx_find just returned, about to be allocated */
static int lost[2];    /* the rover's block left the free set: rover is only an address */

static void idx_init(core_cfg_t cfg) {
  rover[cfg.wide] = found[cfg.wide] = NULL;
  lost[cfg.wide] = 0;
}

CORE_INLINE void idx_insert(core_cfg_t cfg, char *b) {
  /* A merge may have swallowed the rover's block: point at the merged one. */
  char **r = &rover[cfg.wide];
  if (*r >= b && *r < b + tag_size((int)cfg.wide, b)) {
    *r = b;
    lost[cfg.wide] = 0;
  }
}

CORE_INLINE void idx_remove(core_cfg_t cfg, char *b) {
  /* The block just found stays a block start (it is allocated at its
   * bottom), so the rover may keep pointing at it; any other block leaving
   * the free set may be absorbed into a neighbour: the rover keeps its
   * address until a merge places it (idx_insert) or a search needs it. */
  if (b == found[cfg.wide]) {
    found[cfg.wide] = NULL;
    return;
  }
  if (rover[cfg.wide] == b) lost[cfg.wide] = 1;
}

/* The start of the block that holds address `at` (a walk from the region's
 * first block: next fit's searches are linear anyway). */
static char *block_holding(core_cfg_t cfg, char *at) {
  int w = (int)cfg.wide;
  core_region_t *rg = core_region(cfg);
  for (char *b = rg->first; b != rg->epi; b = tag_next(w, b))
    if (at < b + tag_size(w, b)) return b;
  return NULL;
}

static char *implicit_scan(core_cfg_t cfg, char *from, char *to, size_t asize) {
  int w = (int)cfg.wide;
  for (char *b = from; b != to; b = tag_next(w, b))
    if (!tag_is_alloc(w, b) && tag_size(w, b) >= asize) return b;
  return NULL;
}

CORE_INLINE char *idx_find(core_cfg_t cfg, size_t asize) {
  int w = (int)cfg.wide;
  core_region_t *rg = core_region(cfg);
  if (cfg.fit == FIT_FIRST) return implicit_scan(cfg, rg->first, rg->epi, asize);
  if (cfg.fit == FIT_NEXT) {
    if (lost[w]) {
      rover[w] = block_holding(cfg, rover[w]);
      lost[w] = 0;
    }
    char *start = rover[w] ? rover[w] : rg->first;
    char *b = implicit_scan(cfg, start, rg->epi, asize);
    if (!b) b = implicit_scan(cfg, rg->first, start, asize);
    if (b) rover[w] = b; /* nothing fits: the rover stays (CS:APP) */
    found[w] = b;
    return b;
  }
  char *best = NULL;
  size_t best_size = SIZE_MAX;
  for (char *b = rg->first; b != rg->epi; b = tag_next(w, b)) {
    size_t size = tag_size(w, b);
    if (!tag_is_alloc(w, b) && size >= asize && size < best_size) {
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
  int w = (int)cfg.wide;
  core_region_t *rg = core_region(cfg);
  if (rover[w]) {
    /* A block start, or (lost) an address inside the region that the next
     * search resolves to the block holding it. */
    char *b = rg->first;
    while (b != rg->epi && (lost[w] ? b + tag_size(w, b) <= rover[w] : b != rover[w])) b = tag_next(w, b);
    if (b == rg->epi || (!lost[w] && b != rover[w]))
      CORE_FAIL("next-fit rover at offset %zu is not a block start%s", core_heap_off(rover[w]),
                lost[w] ? " nor inside the region" : "");
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
