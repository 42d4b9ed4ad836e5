/* fit_treap.c — the two balanced trees of the fast versions, one treap
 * implementation keyed two ways:
 *  - by address (first fit): every node also keeps the largest block size in
 *    its subtree (links.subtree_max), so "lowest address with size >= n" is
 *    one descent: go left while the left subtree has a large enough block;
 *  - by (size, address) (best fit, blocks above the exact-size bins): the
 *    lower bound of (n, 0) is the smallest large-enough block, lowest address
 *    among equals.
 * Priorities are a hash of the node address (fit_treap_priority), so the
 * expected depth is O(log n) with no random state. Links: a = left,
 * b = right. Recursion depth is the tree depth.
 */
#include "fit_internal.h"

#define L(t) (fit_links(t)->a)
#define R(t) (fit_links(t)->b)

typedef struct {
  size_t size;
  const fit_block_t *addr;
} fit_key_t;

static inline fit_key_t key_of(const fit_block_t *b) { return (fit_key_t){fit_size(b), b}; }

/* Is key k ordered before node t? */
static inline int before(int by_size, fit_key_t k, const fit_block_t *t) {
  if (by_size && k.size != fit_size(t)) return k.size < fit_size(t);
  return k.addr < t;
}

static inline size_t subtree_max(const fit_block_t *t) { return t ? fit_links((fit_block_t *)t)->subtree_max : 0; }

static inline void update(fit_block_t *t) {
  size_t m = fit_size(t), l = subtree_max(L(t)), r = subtree_max(R(t));
  if (l > m) m = l;
  if (r > m) m = r;
  fit_links(t)->subtree_max = m;
}

/* Splits t into the nodes before k (*lo) and the rest (*hi). */
static void split(int by_size, fit_block_t *t, fit_key_t k, fit_block_t **lo, fit_block_t **hi) {
  if (!t) {
    *lo = *hi = NULL;
    return;
  }
  if (before(by_size, k, t)) {
    split(by_size, L(t), k, lo, &L(t));
    *hi = t;
  } else {
    split(by_size, R(t), k, &R(t), hi);
    *lo = t;
  }
  update(t);
}

static fit_block_t *merge(fit_block_t *lo, fit_block_t *hi) {
  if (!lo) return hi;
  if (!hi) return lo;
  if (fit_treap_priority(lo) > fit_treap_priority(hi)) {
    R(lo) = merge(R(lo), hi);
    update(lo);
    return lo;
  }
  L(hi) = merge(lo, L(hi));
  update(hi);
  return hi;
}

static fit_block_t *insert(int by_size, fit_block_t *t, fit_block_t *n, uint64_t prio) {
  if (!t || prio > fit_treap_priority(t)) {
    split(by_size, t, key_of(n), &L(n), &R(n));
    update(n);
    return n;
  }
  if (before(by_size, key_of(n), t))
    L(t) = insert(by_size, L(t), n, prio);
  else
    R(t) = insert(by_size, R(t), n, prio);
  update(t);
  return t;
}

/* Removes node n, found by its key k (which may be its size before a resize). */
static fit_block_t *remove_node(int by_size, fit_block_t *t, fit_block_t *n, fit_key_t k) {
  if (!t) return NULL; /* not present: the checker reports it */
  if (t == n) return merge(L(t), R(t));
  if (before(by_size, k, t))
    L(t) = remove_node(by_size, L(t), n, k);
  else
    R(t) = remove_node(by_size, R(t), n, k);
  update(t);
  return t;
}

/* Recomputes subtree_max on the path to n (address tree, n's size changed). */
static void refresh_path(fit_block_t *t, fit_block_t *n) {
  if (!t) return;
  if (t != n) refresh_path(n < t ? L(t) : R(t), n);
  update(t);
}

void fit_addr_tree_insert(fit_arena_t *a, fit_block_t *b) {
  a->tree_root = insert(0, a->tree_root, b, fit_treap_priority(b));
}

void fit_addr_tree_remove(fit_arena_t *a, fit_block_t *b) {
  a->tree_root = remove_node(0, a->tree_root, b, key_of(b));
}

void fit_addr_tree_refresh(fit_arena_t *a, fit_block_t *b) { refresh_path(a->tree_root, b); }

fit_block_t *fit_addr_tree_find(fit_arena_t *a, size_t need) {
  fit_block_t *t = a->tree_root;
  if (subtree_max(t) < need) return NULL;
  for (;;) {
    if (subtree_max(L(t)) >= need)
      t = L(t);
    else if (fit_size(t) >= need)
      return t;
    else
      t = R(t); /* the right subtree must hold it: subtree_max(t) >= need */
  }
}

void fit_addr_tree_each(fit_block_t *t, void (*visit)(fit_block_t *, void *), void *ctx) {
  if (!t) return;
  fit_addr_tree_each(L(t), visit, ctx);
  visit(t, ctx);
  fit_addr_tree_each(R(t), visit, ctx);
}

void fit_size_tree_insert(fit_arena_t *a, fit_block_t *b) {
  a->tree_root = insert(1, a->tree_root, b, fit_treap_priority(b));
}

void fit_size_tree_remove(fit_arena_t *a, fit_block_t *b, size_t size) {
  a->tree_root = remove_node(1, a->tree_root, b, (fit_key_t){size, b});
}

fit_block_t *fit_size_tree_find(fit_arena_t *a, size_t need) {
  fit_block_t *t = a->tree_root, *best = NULL;
  while (t) {
    if (fit_size(t) >= need) {
      best = t;
      t = L(t);
    } else {
      t = R(t);
    }
  }
  return best;
}
