/* policy_explicit: one explicit doubly linked free list.
 *
 * Free blocks are linked through their payload (32-bit offsets in the narrow
 * region, so a free block still fits in 16 bytes); allocation searches only free blocks instead
 * of the whole heap. The policies differ in where a freed block is inserted
 * and how the list is searched:
 *   explicit-lifo-first  push at the head (O(1) free), first fit;
 *   explicit-fifo-first  push at the tail, first fit;
 *   explicit-addr-first  keep address order (O(n) free), first fit;
 *   explicit-lifo-best   LIFO, best fit (full scan, stops on an exact fit);
 *   explicit-addr-best   address order, best fit (ties go to the lowest address).
 * All keep header and footer on every block and coalesce immediately, as in
 * the textbook. Invariant of this file: the list holds exactly the free
 * blocks, its prev links mirror its next links, and with address order it is
 * sorted. Called through the lab_policy_t objects in policy_registry.c. */
#include "heap_core.h"
#include "policy_families.h"

static core_list_t free_list[2]; /* per region width */

static void idx_init(core_cfg_t cfg) { free_list[cfg.wide].head = free_list[cfg.wide].tail = 0; }

CORE_INLINE void idx_insert(core_cfg_t cfg, char *b) {
  list_insert(cfg, &free_list[cfg.wide], b, cfg.order);
}
CORE_INLINE void idx_remove(core_cfg_t cfg, char *b) { list_remove(cfg, &free_list[cfg.wide], b); }
CORE_INLINE char *idx_find(core_cfg_t cfg, size_t asize) {
  return list_find(cfg, &free_list[cfg.wide], asize, cfg.fit == FIT_BEST);
}

static int idx_check(core_cfg_t cfg, char *err, size_t errlen, size_t *count) {
  return core_check_list(cfg, &free_list[cfg.wide], "free list", cfg.order, NULL, NULL, err,
                         errlen, count);
}

#define EXPLICIT_POLICY(ident, pname, desc, ...) \
  CORE_DEFINE_POLICY(ident, pname, desc, core_check_indexed, __VA_ARGS__)

EXPLICIT_POLICY(lab_policy_explicit_lifo_first, "explicit-lifo-first",
                "explicit list, LIFO insertion, first fit",
                .order = ORDER_LIFO, .fit = FIT_FIRST)
EXPLICIT_POLICY(lab_policy_explicit_fifo_first, "explicit-fifo-first",
                "explicit list, FIFO insertion, first fit",
                .order = ORDER_FIFO, .fit = FIT_FIRST)
EXPLICIT_POLICY(lab_policy_explicit_addr_first, "explicit-addr-first",
                "explicit list, address-ordered insertion, first fit",
                .order = ORDER_ADDR, .fit = FIT_FIRST)
EXPLICIT_POLICY(lab_policy_explicit_lifo_best, "explicit-lifo-best",
                "explicit list, LIFO insertion, best fit",
                .order = ORDER_LIFO, .fit = FIT_BEST)
EXPLICIT_POLICY(lab_policy_explicit_addr_best, "explicit-addr-best",
                "explicit list, address-ordered insertion, best fit (lowest address wins ties)",
                .order = ORDER_ADDR, .fit = FIT_BEST)
