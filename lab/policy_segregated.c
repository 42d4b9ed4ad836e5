/* policy_segregated: segregated free lists, one per size class, and the
 * refinements of the textbook progression built on them.
 *
 * Size classes:
 *   pow2  one class per power of two (16-31, 32-63, ...);
 *   fine  one class per 8 bytes up to 1 KiB (every block in such a class has
 *         the same size, so its first block is also its best), then eight
 *         classes per power of two.
 * A bitmap of non-empty classes finds the next usable class without walking
 * empty lists. First fit takes the first block that fits, starting in the
 * request's class; best fit takes the smallest block of the first class that
 * has one that fits (every block of a higher class fits). Lists are LIFO.
 *
 * The policies, in progression order:
 *   segregated-pow2-first, segregated-pow2-best, segregated-fine-first,
 *   segregated-fine-best        header+footer, immediate coalescing;
 * three variants of segregated-fine-best, one change each:
 *   segregated-deferred         coalesce only when a search fails;
 *   segregated-split64          only split when the rest is >= 64 bytes;
 *   segregated-min32            32-byte minimal blocks, what 8-byte pointer
 *                               links would need (every other policy gets
 *                               16 from its 32-bit links): the cost of the
 *                               minimal block size;
 * and the refinements, each adding to the one before:
 *   segregated-nofooter         footerless allocated blocks (prev-allocated
 *                               bit), and a free last block is extended by
 *                               only what is missing;
 *   segregated-realloc          + in-place realloc (shrink, grow into the
 *                               next block, grow at the heap end);
 *   segregated-apart            + small requests kept apart from large ones
 *                               (SMALL_APART_CFG in heap_core.h). Tessera's
 *                               best policy (lab_policy_default()): as
 *                               compact as tree-best-apart on the classic
 *                               traces and about twice as fast.
 * Invariant of this file: every free block is in the list of its own size
 * class, and a class's bitmap bit is set exactly when its list is non-empty.
 * Called through the lab_policy_t objects in policy_registry.c. */
#include "heap_core.h"
#include "policy_families.h"

#define SEG_FINE_EXACT 1024 /* classes are 8 bytes wide up to here */
/* Enough fine classes for every block size below 2^31 (narrow) and below
 * 2^57 (wide, above any request core_malloc accepts). */
#define SEG_CLASSES_NARROW 296
#define SEG_CLASSES_WIDE 504
#define SEG_WORDS_WIDE ((SEG_CLASSES_WIDE + 63) / 64)

_Static_assert(SEG_FINE_EXACT / 8 - 2 + 1 + (30 - 10) * 8 + 8 <= SEG_CLASSES_NARROW,
               "fine classes must cover every narrow block size below 2^31");
_Static_assert(SEG_FINE_EXACT / 8 - 2 + 1 + (56 - 10) * 8 + 8 <= SEG_CLASSES_WIDE,
               "fine classes must cover every wide block size below 2^57");

/* Per region width (cfg.wide); the narrow region uses the first
 * SEG_CLASSES_NARROW classes only. */
static core_list_t seg_lists[2][SEG_CLASSES_WIDE];
static uint64_t seg_nonempty[2][SEG_WORDS_WIDE];

CORE_INLINE unsigned seg_classes(core_cfg_t cfg) {
  return cfg.wide ? SEG_CLASSES_WIDE : SEG_CLASSES_NARROW;
}
CORE_INLINE unsigned seg_words(core_cfg_t cfg) { return (seg_classes(cfg) + 63) / 64; }

CORE_INLINE unsigned seg_log2(size_t n) { return 63u - (unsigned)__builtin_clzll(n); }

CORE_INLINE unsigned seg_class(core_cfg_t cfg, size_t size) {
  if (!cfg.fine_classes) return seg_log2(size) - 4; /* 16..31 -> 0 */
  if (size <= SEG_FINE_EXACT) return (unsigned)(size / 8 - 2);
  unsigned e = seg_log2(size);
  unsigned sub = (unsigned)(size >> (e - 3)) & 7u;
  return SEG_FINE_EXACT / 8 - 1 + (e - 10) * 8 + sub;
}

static void idx_init(core_cfg_t cfg) {
  memset(seg_lists[cfg.wide], 0, sizeof seg_lists[cfg.wide]);
  memset(seg_nonempty[cfg.wide], 0, sizeof seg_nonempty[cfg.wide]);
}

CORE_INLINE void idx_insert(core_cfg_t cfg, char *b) {
  bins_push(cfg, seg_lists[cfg.wide], seg_nonempty[cfg.wide], seg_class(cfg, tag_size((int)cfg.wide, b)), b);
}

CORE_INLINE void idx_remove(core_cfg_t cfg, char *b) {
  bins_remove(cfg, seg_lists[cfg.wide], seg_nonempty[cfg.wide], seg_class(cfg, tag_size((int)cfg.wide, b)), b);
}

/* First non-empty class >= c, or -1. */
CORE_INLINE int seg_next_class(core_cfg_t cfg, unsigned c) {
  return bins_next(seg_nonempty[cfg.wide], seg_words(cfg), c);
}

CORE_INLINE char *idx_find(core_cfg_t cfg, size_t asize) {
  int best = cfg.fit == FIT_BEST;
  core_list_t *lists = seg_lists[cfg.wide];
  unsigned c = seg_class(cfg, asize);
  int k = seg_next_class(cfg, c);
  if (k < 0) return NULL;
  if ((unsigned)k == c) {
    char *b = list_find(cfg, &lists[c], asize, best);
    if (b) return b;
    k = seg_next_class(cfg, c + 1);
    if (k < 0) return NULL;
  }
  /* Every block of a higher class fits. */
  if (!best) return core_ptr(cfg, lists[k].head);
  return list_find(cfg, &lists[k], asize, 1);
}

typedef struct seg_check_ctx_s {
  core_cfg_t cfg;
  unsigned cls;
} seg_check_ctx_t;

static int seg_in_class(char *b, void *ctx) {
  seg_check_ctx_t *c = ctx;
  return seg_class(c->cfg, tag_size((int)c->cfg.wide, b)) == c->cls;
}

static int idx_check(core_cfg_t cfg, char *err, size_t errlen, size_t *count) {
  for (unsigned c = 0; c < SEG_CLASSES_WIDE; c++) {
    core_list_t *l = &seg_lists[cfg.wide][c];
    int bit = bins_bit(seg_nonempty[cfg.wide], c);
    if (c >= seg_classes(cfg)) {
      if (l->head || l->tail || bit)
        CORE_FAIL("size class %u is beyond the narrow format but in use", c);
      continue;
    }
    char where[48];
    snprintf(where, sizeof where, "size class %u", c);
    seg_check_ctx_t ctx = {cfg, c};
    if (core_check_list(cfg, l, where, ORDER_LIFO, seg_in_class, &ctx, err, errlen, count) != 0)
      return -1;
    if (bit != (l->head != 0))
      CORE_FAIL("size class %u: non-empty bit is %d but the list is %s", c, bit,
                l->head ? "non-empty" : "empty");
  }
  return 0;
}

#define SEG_POLICY(ident, pname, desc, ...) \
  CORE_DEFINE_POLICY(ident, pname, desc, core_check_indexed, __VA_ARGS__)

SEG_POLICY(lab_policy_segregated_pow2_first, "segregated-pow2-first",
           "segregated lists, power-of-two classes, first fit",
           .fit = FIT_FIRST)
SEG_POLICY(lab_policy_segregated_pow2_best, "segregated-pow2-best",
           "segregated lists, power-of-two classes, best fit within the class",
           .fit = FIT_BEST)
SEG_POLICY(lab_policy_segregated_fine_first, "segregated-fine-first",
           "segregated lists, exact 8-byte classes to 1 KiB then 8 per power of two, first fit",
           .fine_classes = 1, .fit = FIT_FIRST)
SEG_POLICY(lab_policy_segregated_fine_best, "segregated-fine-best",
           "segregated lists, fine classes, best fit within the class",
           .fine_classes = 1, .fit = FIT_BEST)
SEG_POLICY(lab_policy_segregated_deferred, "segregated-deferred",
           "segregated-fine-best with deferred coalescing (only when a search fails)",
           .fine_classes = 1, .fit = FIT_BEST, .deferred = 1)
SEG_POLICY(lab_policy_segregated_split64, "segregated-split64",
           "segregated-fine-best, but splits only when the rest is at least 64 bytes",
           .fine_classes = 1, .fit = FIT_BEST, .split_min = 64)
SEG_POLICY(lab_policy_segregated_min32, "segregated-min32",
           "segregated-fine-best with 32-byte minimal blocks, as 8-byte pointer links need",
           .fine_classes = 1, .fit = FIT_BEST, .min_block = 32)
SEG_POLICY(lab_policy_segregated_nofooter, "segregated-nofooter",
           "segregated-fine-best, footerless allocated blocks, free last block extended",
           .fine_classes = 1, .fit = FIT_BEST, .footerless = 1, .extend_missing = 1)
SEG_POLICY(lab_policy_segregated_realloc, "segregated-realloc",
           "segregated-nofooter + in-place realloc (shrink, grow into next, grow at heap end)",
           .fine_classes = 1, .fit = FIT_BEST, .footerless = 1, .extend_missing = 1,
           .realloc_inplace = 1)
SEG_POLICY(lab_policy_segregated_apart, "segregated-apart",
           "segregated-realloc + small requests kept apart from large ones (Tessera's best)",
           .fine_classes = 1, .fit = FIT_BEST, .footerless = 1, .extend_missing = 1,
           .realloc_inplace = 1, SMALL_APART_CFG)
