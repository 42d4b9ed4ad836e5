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

static tag_t tree_root;

#define TREE_LEFT(b) (*tag_link0(b))
#define TREE_RIGHT(b) (*tag_link1(b))

CORE_INLINE uint64_t tree_key(char *b) { return ((uint64_t)tag_size(b) << 32) | core_off(b); }

/* A fixed pseudo-random priority: the murmur3 finaliser of the offset. (A
 * plain multiplicative hash is not enough: blocks at evenly spaced offsets,
 * freed in address order, then get priorities that build a deep tree.) */
CORE_INLINE uint32_t tree_prio(tag_t off) {
  uint32_t h = off;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

/* Exact small bins: one LIFO list per block size up to TREE_BIN_MAX, with a
 * bitmap of non-empty bins. Their first block is a best fit by size, found
 * in O(1); only larger blocks go to the tree. */
#define TREE_BIN_MAX 1024
#define TREE_BINS (TREE_BIN_MAX / 8 - 1) /* sizes 16, 24, ..., 1024 */
#define TREE_BIN_WORDS ((TREE_BINS + 63) / 64)
static core_list_t tree_bins[TREE_BINS];
static uint64_t tree_bin_nonempty[TREE_BIN_WORDS];

CORE_INLINE unsigned tree_bin(size_t size) { return (unsigned)(size / 8 - 2); }

static void idx_init(core_cfg_t cfg) {
  (void)cfg;
  tree_root = 0;
  memset(tree_bins, 0, sizeof tree_bins);
  memset(tree_bin_nonempty, 0, sizeof tree_bin_nonempty);
}

CORE_INLINE void tree_insert(char *b);
CORE_INLINE void tree_remove(char *b);
CORE_INLINE char *tree_find(size_t asize);

CORE_INLINE void idx_insert(core_cfg_t cfg, char *b) {
  (void)cfg;
  size_t size = tag_size(b);
  if (size > TREE_BIN_MAX) {
    tree_insert(b);
    return;
  }
  unsigned c = tree_bin(size);
  list_push_front(&tree_bins[c], b);
  tree_bin_nonempty[c / 64] |= (uint64_t)1 << (c % 64);
}

CORE_INLINE void idx_remove(core_cfg_t cfg, char *b) {
  (void)cfg;
  size_t size = tag_size(b);
  if (size > TREE_BIN_MAX) {
    tree_remove(b);
    return;
  }
  unsigned c = tree_bin(size);
  list_remove(&tree_bins[c], b);
  if (!tree_bins[c].head) tree_bin_nonempty[c / 64] &= ~((uint64_t)1 << (c % 64));
}

CORE_INLINE char *idx_find(core_cfg_t cfg, size_t asize) {
  (void)cfg;
  if (asize <= TREE_BIN_MAX) {
    unsigned c = tree_bin(asize);
    for (unsigned w = c / 64; w < TREE_BIN_WORDS; w++) {
      uint64_t bits = tree_bin_nonempty[w];
      if (w == c / 64) bits &= ~(uint64_t)0 << (c % 64);
      if (bits) return core_ptr(tree_bins[w * 64 + (unsigned)__builtin_ctzll(bits)].head);
    }
  }
  return tree_find(asize);
}

CORE_INLINE void tree_insert(char *b) {
  tag_t off = core_off(b);
  uint32_t prio = tree_prio(off);
  uint64_t key = tree_key(b);
  tag_t *slot = &tree_root;
  /* Descend while the nodes outrank the new one... */
  while (*slot && tree_prio(*slot) > prio) {
    char *n = core_ptr(*slot);
    slot = tree_key(n) < key ? &TREE_RIGHT(n) : &TREE_LEFT(n);
  }
  /* ...then split the subtree there into keys below and above b's. */
  tag_t t = *slot;
  tag_t *lo = &TREE_LEFT(b), *hi = &TREE_RIGHT(b);
  while (t) {
    char *n = core_ptr(t);
    if (tree_key(n) < key) {
      *lo = t;
      lo = &TREE_RIGHT(n);
      t = TREE_RIGHT(n);
    } else {
      *hi = t;
      hi = &TREE_LEFT(n);
      t = TREE_LEFT(n);
    }
  }
  *lo = *hi = 0;
  *slot = off;
}

CORE_INLINE void tree_remove(char *b) {
  tag_t off = core_off(b);
  uint64_t key = tree_key(b);
  tag_t *slot = &tree_root;
  while (*slot != off) {
    char *n = core_ptr(*slot);
    slot = tree_key(n) < key ? &TREE_RIGHT(n) : &TREE_LEFT(n);
  }
  /* Replace b by the merge of its subtrees (all left keys < all right keys). */
  tag_t l = TREE_LEFT(b), r = TREE_RIGHT(b);
  while (l && r) {
    if (tree_prio(l) > tree_prio(r)) {
      *slot = l;
      slot = &TREE_RIGHT(core_ptr(l));
      l = *slot;
    } else {
      *slot = r;
      slot = &TREE_LEFT(core_ptr(r));
      r = *slot;
    }
  }
  *slot = l ? l : r;
}

CORE_INLINE char *tree_find(size_t asize) {
  char *best = NULL;
  tag_t t = tree_root;
  while (t) {
    char *n = core_ptr(t);
    if (tag_size(n) >= asize) {
      best = n;
      t = TREE_LEFT(n);
    } else {
      t = TREE_RIGHT(n);
    }
  }
  return best;
}

/* Recursive in-order walk (depth is O(log n) in expectation; bounded by the
 * member count, since a revisited node is caught as listed twice). */
static int tree_check_node(tag_t t, uint64_t *last, int *have_last, char *err, size_t errlen,
                           size_t *count) {
  if (!t) return 0;
  char *n = core_ptr(t);
  if (core_check_member(n, "tree", err, errlen) != 0) return -1;
  if (tag_size(n) <= TREE_BIN_MAX)
    CORE_FAIL("tree: block at offset %zu (size %zu) belongs in a small bin", core_heap_off(n),
              tag_size(n));
  (*count)++;
  tag_t kids[2] = {TREE_LEFT(n), TREE_RIGHT(n)};
  for (int i = 0; i < 2; i++)
    if (kids[i] && tree_prio(kids[i]) > tree_prio(t))
      CORE_FAIL("tree: node at offset %zu outranks its parent (heap order broken)",
                core_heap_off(core_ptr(kids[i])));
  if (tree_check_node(kids[0], last, have_last, err, errlen, count) != 0) return -1;
  uint64_t key = tree_key(n);
  if (*have_last && key <= *last)
    CORE_FAIL("tree: node at offset %zu (size %zu) breaks (size, address) order",
              core_heap_off(n), tag_size(n));
  *last = key;
  *have_last = 1;
  return tree_check_node(kids[1], last, have_last, err, errlen, count);
}

static int tree_bin_accepts(char *b, void *ctx) {
  return tag_size(b) <= TREE_BIN_MAX && tree_bin(tag_size(b)) == *(unsigned *)ctx;
}

static int idx_check(core_cfg_t cfg, char *err, size_t errlen, size_t *count) {
  (void)cfg;
  for (unsigned c = 0; c < TREE_BINS; c++) {
    char where[32];
    snprintf(where, sizeof where, "small bin %u", c);
    if (core_check_list(&tree_bins[c], where, ORDER_LIFO, tree_bin_accepts, &c, err, errlen,
                        count) != 0)
      return -1;
    int bit = (tree_bin_nonempty[c / 64] >> (c % 64)) & 1;
    if (bit != (tree_bins[c].head != 0))
      CORE_FAIL("small bin %u: non-empty bit is %d but the list is %s", c, bit,
                tree_bins[c].head ? "non-empty" : "empty");
  }
  uint64_t last = 0;
  int have_last = 0;
  return tree_check_node(tree_root, &last, &have_last, err, errlen, count);
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
