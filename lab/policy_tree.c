/* policy_tree: best fit in O(log n) with a size-ordered balanced tree.
 *
 * Free blocks above 1 KiB live in one treap (a binary search tree that is a heap
 * on a pseudo-random priority, hence balanced in expectation) keyed by
 * (size, address). The best fit is the lower bound of (asize, 0): the
 * smallest block that fits and, among equal sizes, the lowest address, which
 * keeps the heap compact. The two links of a free block are the left and
 * right child, so a free block still fits in 16 bytes; the priority is a hash
 * of the block's offset and is never stored. No parent links: removal finds
 * the node again by its key from the root, still O(log n).
 *
 * Blocks up to 1 KiB do not enter the tree: they sit in one LIFO bin per
 * exact size, with a bitmap of non-empty bins, so the first block of the
 * first non-empty bin at or above the request is a best fit by size, in O(1)
 * (dlmalloc's small bins). The tree holds the larger blocks.
 *
 * Policies (both footerless, extend a free last block by only what is
 * missing, and realloc in place):
 *   tree-best        exact best fit, everything placed at the bottom of the
 *                    chosen block;
 *   tree-best-apart  + small requests kept apart from large ones, exactly as
 *                    in segregated-apart (SMALL_APART_CFG in heap_core.h),
 *                    which is as compact on the classic traces and faster:
 *                    the tree's descents miss the cache on large heaps.
 * Invariant of this file: in-order traversal is strictly increasing in
 * (size, address), and every node's priority is >= its children's.
 * Called through the lab_policy_t objects in policy_registry.c. */
#include "heap_core.h"
#include "policy_families.h"

/* Per region width (cfg.wide). The root is a link word like the children
 * (read and written through tag_load/tag_store of the region's width), so
 * insertion and removal can walk "slots" (addresses of link words). */
static uint64_t tree_root[2];

CORE_INLINE char *tree_root_slot(core_cfg_t cfg) { return (char *)&tree_root[cfg.wide]; }
CORE_INLINE char *tree_left(core_cfg_t cfg, char *b) { return tag_link_slot((int)cfg.wide, b, 0); }
CORE_INLINE char *tree_right(core_cfg_t cfg, char *b) { return tag_link_slot((int)cfg.wide, b, 1); }
CORE_INLINE tag_t slot_get(core_cfg_t cfg, char *slot) { return tag_load((int)cfg.wide, slot); }
CORE_INLINE void slot_set(core_cfg_t cfg, char *slot, tag_t off) {
  tag_store((int)cfg.wide, slot, off);
}

/* (size, address) order: is n before the block at b of size bsize? */
CORE_INLINE int tree_before(core_cfg_t cfg, char *n, size_t bsize, char *b) {
  size_t nsize = tag_size((int)cfg.wide, n);
  return nsize < bsize || (nsize == bsize && n < b);
}

/* A fixed pseudo-random priority: the murmur3 finaliser of the offset
 * (folded to 32 bits; narrow offsets are 32-bit already). (A plain
 * multiplicative hash is not enough: blocks at evenly spaced offsets, freed
 * in address order, then get priorities that build a deep tree.) */
CORE_INLINE uint32_t tree_prio(tag_t off) {
  uint32_t h = (uint32_t)(off ^ (off >> 32));
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

/* Exact small bins: one LIFO list per block size up to TREE_BIN_MAX, with a
 * bitmap of non-empty bins. Their first block is a best fit by size, found
 * in O(1); only larger blocks go to the tree. (Wide blocks start at 32 bytes,
 * so the wide region leaves the first two bins empty.) */
#define TREE_BIN_MAX 1024
#define TREE_BINS (TREE_BIN_MAX / 8 - 1) /* sizes 16, 24, ..., 1024 */
#define TREE_BIN_WORDS ((TREE_BINS + 63) / 64)
static core_list_t tree_bins[2][TREE_BINS];
static uint64_t tree_bin_nonempty[2][TREE_BIN_WORDS];

CORE_INLINE unsigned tree_bin(size_t size) { return (unsigned)(size / 8 - 2); }

static void idx_init(core_cfg_t cfg) {
  tree_root[cfg.wide] = 0;
  memset(tree_bins[cfg.wide], 0, sizeof tree_bins[cfg.wide]);
  memset(tree_bin_nonempty[cfg.wide], 0, sizeof tree_bin_nonempty[cfg.wide]);
}

CORE_INLINE void tree_insert(core_cfg_t cfg, char *b);
CORE_INLINE void tree_remove(core_cfg_t cfg, char *b);
CORE_INLINE char *tree_find(core_cfg_t cfg, size_t asize);

CORE_INLINE void idx_insert(core_cfg_t cfg, char *b) {
  size_t size = tag_size((int)cfg.wide, b);
  if (size > TREE_BIN_MAX) {
    tree_insert(cfg, b);
    return;
  }
  bins_push(cfg, tree_bins[cfg.wide], tree_bin_nonempty[cfg.wide], tree_bin(size), b);
}

CORE_INLINE void idx_remove(core_cfg_t cfg, char *b) {
  size_t size = tag_size((int)cfg.wide, b);
  if (size > TREE_BIN_MAX) {
    tree_remove(cfg, b);
    return;
  }
  bins_remove(cfg, tree_bins[cfg.wide], tree_bin_nonempty[cfg.wide], tree_bin(size), b);
}

CORE_INLINE char *idx_find(core_cfg_t cfg, size_t asize) {
  if (asize <= TREE_BIN_MAX) {
    int c = bins_next(tree_bin_nonempty[cfg.wide], TREE_BIN_WORDS, tree_bin(asize));
    if (c >= 0) return core_ptr(cfg, tree_bins[cfg.wide][c].head);
  }
  return tree_find(cfg, asize);
}

CORE_INLINE void tree_insert(core_cfg_t cfg, char *b) {
  tag_t off = core_off(cfg, b);
  uint32_t prio = tree_prio(off);
  size_t bsize = tag_size((int)cfg.wide, b);
  char *slot = tree_root_slot(cfg);
  tag_t t;
  /* Descend while the nodes outrank the new one... */
  while ((t = slot_get(cfg, slot)) && tree_prio(t) > prio) {
    char *n = core_ptr(cfg, t);
    slot = tree_before(cfg, n, bsize, b) ? tree_right(cfg, n) : tree_left(cfg, n);
  }
  /* ...then split the subtree there into keys below and above b's. */
  char *lo = tree_left(cfg, b), *hi = tree_right(cfg, b);
  while (t) {
    char *n = core_ptr(cfg, t);
    if (tree_before(cfg, n, bsize, b)) {
      slot_set(cfg, lo, t);
      lo = tree_right(cfg, n);
      t = slot_get(cfg, lo);
    } else {
      slot_set(cfg, hi, t);
      hi = tree_left(cfg, n);
      t = slot_get(cfg, hi);
    }
  }
  slot_set(cfg, lo, 0);
  slot_set(cfg, hi, 0);
  slot_set(cfg, slot, off);
}

CORE_INLINE void tree_remove(core_cfg_t cfg, char *b) {
  tag_t off = core_off(cfg, b);
  size_t bsize = tag_size((int)cfg.wide, b);
  char *slot = tree_root_slot(cfg);
  tag_t t;
  while ((t = slot_get(cfg, slot)) != off) {
    char *n = core_ptr(cfg, t);
    slot = tree_before(cfg, n, bsize, b) ? tree_right(cfg, n) : tree_left(cfg, n);
  }
  /* Replace b by the merge of its subtrees (all left keys < all right keys). */
  tag_t l = slot_get(cfg, tree_left(cfg, b)), r = slot_get(cfg, tree_right(cfg, b));
  while (l && r) {
    if (tree_prio(l) > tree_prio(r)) {
      slot_set(cfg, slot, l);
      slot = tree_right(cfg, core_ptr(cfg, l));
      l = slot_get(cfg, slot);
    } else {
      slot_set(cfg, slot, r);
      slot = tree_left(cfg, core_ptr(cfg, r));
      r = slot_get(cfg, slot);
    }
  }
  slot_set(cfg, slot, l ? l : r);
}

CORE_INLINE char *tree_find(core_cfg_t cfg, size_t asize) {
  char *best = NULL;
  tag_t t = slot_get(cfg, tree_root_slot(cfg));
  while (t) {
    char *n = core_ptr(cfg, t);
    if (tag_size((int)cfg.wide, n) >= asize) {
      best = n;
      t = slot_get(cfg, tree_left(cfg, n));
    } else {
      t = slot_get(cfg, tree_right(cfg, n));
    }
  }
  return best;
}

/* Recursive in-order walk (depth is O(log n) in expectation; bounded by the
 * member count, since a revisited node is caught as listed twice). last is
 * the previous node visited (NULL before the first). */
static int tree_check_node(core_cfg_t cfg, tag_t t, char **last, char *err, size_t errlen,
                           size_t *count) {
  if (!t) return 0;
  int w = (int)cfg.wide;
  char *n = core_ptr(cfg, t);
  if (core_check_member(cfg, n, "tree", err, errlen) != 0) return -1;
  if (tag_size(w, n) <= TREE_BIN_MAX)
    CORE_FAIL("tree: block at offset %zu (size %zu) belongs in a small bin", core_heap_off(n),
              tag_size(w, n));
  (*count)++;
  tag_t kids[2] = {slot_get(cfg, tree_left(cfg, n)), slot_get(cfg, tree_right(cfg, n))};
  for (int i = 0; i < 2; i++)
    if (kids[i] && tree_prio(kids[i]) > tree_prio(t))
      CORE_FAIL("tree: node at offset %zu outranks its parent (heap order broken)",
                core_heap_off(core_ptr(cfg, kids[i])));
  if (tree_check_node(cfg, kids[0], last, err, errlen, count) != 0) return -1;
  /* Sizes read without the mark bit core_check_member set. */
  if (*last && !tree_before(cfg, *last, tag_size(w, n), n))
    CORE_FAIL("tree: node at offset %zu (size %zu) breaks (size, address) order",
              core_heap_off(n), tag_size(w, n));
  *last = n;
  return tree_check_node(cfg, kids[1], last, err, errlen, count);
}

typedef struct tree_bin_ctx_s {
  core_cfg_t cfg;
  unsigned bin;
} tree_bin_ctx_t;

static int tree_bin_accepts(char *b, void *ctx) {
  tree_bin_ctx_t *c = ctx;
  size_t size = tag_size((int)c->cfg.wide, b);
  return size <= TREE_BIN_MAX && tree_bin(size) == c->bin;
}

static int idx_check(core_cfg_t cfg, char *err, size_t errlen, size_t *count) {
  for (unsigned c = 0; c < TREE_BINS; c++) {
    char where[32];
    snprintf(where, sizeof where, "small bin %u", c);
    tree_bin_ctx_t ctx = {cfg, c};
    core_list_t *l = &tree_bins[cfg.wide][c];
    if (core_check_list(cfg, l, where, ORDER_LIFO, tree_bin_accepts, &ctx, err, errlen, count) !=
        0)
      return -1;
    int bit = bins_bit(tree_bin_nonempty[cfg.wide], c);
    if (bit != (l->head != 0))
      CORE_FAIL("small bin %u: non-empty bit is %d but the list is %s", c, bit,
                l->head ? "non-empty" : "empty");
  }
  char *last = NULL;
  return tree_check_node(cfg, slot_get(cfg, tree_root_slot(cfg)), &last, err, errlen, count);
}

#define TREE_POLICY(ident, pname, desc, ...) \
  CORE_DEFINE_POLICY(ident, pname, desc, core_check_indexed, __VA_ARGS__)

TREE_POLICY(lab_policy_tree_best, "tree-best",
            "treap keyed by (size, address): O(log n) exact best fit, footerless, in-place realloc",
            .fit = FIT_BEST, .footerless = 1, .extend_missing = 1, .realloc_inplace = 1)
TREE_POLICY(lab_policy_tree_best_apart, "tree-best-apart",
            "tree-best + small requests kept apart from large ones",
            .fit = FIT_BEST, .footerless = 1, .extend_missing = 1, .realloc_inplace = 1,
            SMALL_APART_CFG)
