/* fit_internal.h — block layout, heap ("arena") state and the seams between
 * the files of libmymalloc. Internal: only the compat sources and the compat tests
 * include it.
 *
 * Memory layout. Every block starts with a 16-byte header; the payload follows
 * and is 16-byte aligned. Block sizes (header included) are multiples of 16.
 * Blocks live in *runs*: stretches of memory that one sbrk call (or several
 * calls that returned adjacent memory) gave to one arena. Inside a run the
 * blocks tile the memory exactly; the first block of a run has prev_units 0,
 * the last one carries FIT_LAST. Nothing ever looks across a run boundary,
 * because the program break is shared with the C library and the next sbrk
 * may return memory that is not adjacent to ours.
 *
 * Invariants (checked by fit_check_arena):
 *  - a block's header says its size, whether it is free, whether it ends its
 *    run, the size of its physical predecessor (0 = first of run), the id
 *    of the arena that owns it, and whether its physical predecessor may be
 *    free (prev_free: 1 whenever it is free, and may stay 1 after it is
 *    allocated again; 0 on the first block of a run and on free blocks);
 *  - no two free blocks are physically adjacent (free coalesces both sides);
 *  - every free block is in its arena's free index exactly once, and the
 *    index holds nothing else;
 *  - arena->free_bytes is the sum of the sizes of the free blocks;
 *  - prev_free is exactly 0 or 1 (bf_free turns it into a mask);
 *  - an arena whose index is not FIT_INDEX_SIZE_BINS has every bin empty
 *    (bf_malloc's exact fit does not test the index kind).
 *
 * Free indexes (one per arena, chosen when the arena is first used):
 *  - FIT_INDEX_LIST: address-ordered doubly linked list, linear scans (the
 *    naive versions of the assignment, fit_list.c);
 *  - FIT_INDEX_ADDR_TREE: address-ordered treap whose nodes know the largest
 *    block in their subtree: first fit in O(log n) (fit_addr_tree.c);
 *  - FIT_INDEX_SIZE_BINS: one list per exact block size up to
 *    FIT_BIN_LIMIT with a two-level bitmap, and a (size, address)-ordered
 *    treap above it: best fit in O(1) / O(log n) (fit_size_index.h).
 */
#ifndef TESSERA_FIT_INTERNAL_H
#define TESSERA_FIT_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FIT_ALIGN 16u
#define FIT_HEADER_SIZE 16u
/* A free block must hold its index links (three words for the address tree)
 * after the header: 16 + 24, rounded up to the alignment. */
#define FIT_MIN_BLOCK 48u
/* prev_units is 32 bits of 16-byte units: blocks stay below 64 GiB. */
#define FIT_MAX_BLOCK (((size_t)UINT32_MAX) * FIT_ALIGN)

#define FIT_FREE ((uint64_t)1)
#define FIT_LAST ((uint64_t)2)
/* bit 2 is the checker's scratch mark (fit_check.c); bit 3 is unused */
#define FIT_FLAGS ((uint64_t)15)
/* The top 24 bits of an allocated block's size_flags hold its allocation
 * stamp (fit_stamp_now): best fit with the size bins uses the stamps of a
 * hole's two neighbours to decide which end of the hole to hand out
 * (fit_arena.h). Sizes stay below 2^36 (FIT_MAX_BLOCK). */
#define FIT_STAMP_SHIFT 40
#define FIT_STAMP_BITS 24
#define FIT_SIZE_MASK ((((uint64_t)1 << FIT_STAMP_SHIFT) - 1) & ~FIT_FLAGS)

/* prev_free lets free() skip the predecessor's header (a cache miss) when
 * the predecessor cannot be free. A block that becomes free sets it in its
 * successor, whose header free() has just read anyway; an allocation does
 * not clear it (that would cost a store to another line on every exact
 * fit, and the equal-size workload showed it), so a stale 1 only makes the
 * next free() look at the predecessor's header, and clear it. It is a byte
 * of its own so that setting it is a plain store. */
typedef struct fit_block {
  uint32_t prev_units; /* size of the physical predecessor / 16; 0 = first of run */
  uint16_t owner;      /* id of the owning arena (fit_arena_by_id) */
  uint8_t prev_free;   /* 1 if the physical predecessor may be free; only 0 or 1 (bf_free masks with it) */
  uint8_t remote_freed; /* ts_nolock: another thread has pushed it onto its owner's remote stack */
  uint64_t size_flags; /* block size in bytes | FIT_FREE | FIT_LAST */
} fit_block_t;

_Static_assert(sizeof(fit_block_t) == FIT_HEADER_SIZE, "header is 16 bytes");
_Static_assert(FIT_MIN_BLOCK % FIT_ALIGN == 0, "min block keeps alignment");

/* Links stored in the payload of a free block; which fields are used depends
 * on the arena's index kind. */
typedef struct fit_links {
  fit_block_t *a; /* list: prev;  trees: left */
  fit_block_t *b; /* list: next;  trees: right */
  size_t subtree_max; /* address tree: largest block size in the subtree */
} fit_links_t;

_Static_assert(FIT_HEADER_SIZE + sizeof(fit_links_t) <= FIT_MIN_BLOCK, "links fit");

/* Each run starts with this 16-byte record, so the checker (and a reader in a
 * debugger) can walk every block an arena owns. */
typedef struct fit_run {
  struct fit_run *next; /* the arena's previous run */
  uintptr_t reserved;   /* keeps the first block 16-byte aligned */
} fit_run_t;

_Static_assert(sizeof(fit_run_t) == FIT_ALIGN, "run record keeps alignment");

typedef enum { FIT_FIRST_FIT = 1, FIT_BEST_FIT = 2 } fit_policy_t;
typedef enum {
  FIT_INDEX_NONE = 0,
  FIT_INDEX_LIST,
  FIT_INDEX_ADDR_TREE,
  FIT_INDEX_SIZE_BINS
} fit_index_kind_t;

/* Exact-size bins: bin i holds free blocks of exactly i*16 bytes. */
#define FIT_BIN_COUNT 8192u
#define FIT_BIN_LIMIT ((size_t)FIT_BIN_COUNT * FIT_ALIGN) /* first size not binned */
#define FIT_BIN_WORDS (FIT_BIN_COUNT / 64u)

/* Arena ids stored in block headers. */
enum {
  FIT_ARENA_FF = 1,
  FIT_ARENA_BF = 2,
  FIT_ARENA_LOCKED = 3,
  FIT_ARENA_THREAD0 = 16
};
#define FIT_MAX_THREAD_ARENAS 64u
_Static_assert(FIT_ARENA_THREAD0 + FIT_MAX_THREAD_ARENAS <= UINT16_MAX, "arena ids fit the header's owner field");

typedef struct fit_arena {
  uint32_t id;
  fit_policy_t policy;
  fit_index_kind_t index_kind; /* FIT_INDEX_NONE until first use */
  fit_run_t *runs; /* newest first */
  /* The run we can extend: its end and its last block (NULL = none yet). */
  char *top_end;
  fit_block_t *top_last;
  _Atomic unsigned long free_bytes; /* written by the owner only */
  /* Allocations so far (the stamps of fit_stamp_now), kept shifted into
   * place (the top FIT_STAMP_BITS bits; it wraps with them), beside
   * free_bytes, on the cache line every malloc touches anyway. */
  uint64_t alloc_clock;
  /* FIT_INDEX_LIST */
  fit_block_t *list_head;
  /* FIT_INDEX_ADDR_TREE, and the large-size treap of FIT_INDEX_SIZE_BINS */
  fit_block_t *tree_root;
  /* FIT_INDEX_SIZE_BINS */
  uint64_t bin_summary[FIT_BIN_WORDS / 64u];
  uint64_t bin_bits[FIT_BIN_WORDS];
  fit_block_t *bins[FIT_BIN_COUNT];
  /* ts_nolock: blocks freed by other threads, pushed lock-free, taken by the
   * owner (Treiber stack, the link is the first payload word). */
  _Atomic(fit_block_t *) remote_frees;
  atomic_int claimed; /* thread arenas: 1 while a live thread owns it */
} fit_arena_t;

/* --- block helpers ------------------------------------------------------ */
static inline size_t fit_size(const fit_block_t *b) { return (size_t)(b->size_flags & FIT_SIZE_MASK); }
static inline int fit_is_free(const fit_block_t *b) { return (b->size_flags & FIT_FREE) != 0; }
static inline int fit_is_last(const fit_block_t *b) { return (b->size_flags & FIT_LAST) != 0; }
static inline void *fit_payload(fit_block_t *b) { return (char *)b + FIT_HEADER_SIZE; }
static inline fit_block_t *fit_header_of(void *p) { return (fit_block_t *)((char *)p - FIT_HEADER_SIZE); }
static inline fit_links_t *fit_links(fit_block_t *b) { return (fit_links_t *)fit_payload(b); }
static inline fit_block_t *fit_next_phys(fit_block_t *b) { return (fit_block_t *)((char *)b + fit_size(b)); }
static inline fit_block_t *fit_prev_phys(fit_block_t *b) {
  return (fit_block_t *)((char *)b - (size_t)b->prev_units * FIT_ALIGN);
}
static inline void fit_set_size(fit_block_t *b, size_t size, uint64_t flags) {
  b->size_flags = (uint64_t)size | flags;
}
/* The stamp of a block allocated now, ready to be or-ed into size_flags. */
static inline uint64_t fit_stamp_now(fit_arena_t *a) {
  return a->alloc_clock += (uint64_t)1 << FIT_STAMP_SHIFT;
}
_Static_assert(FIT_STAMP_SHIFT + FIT_STAMP_BITS == 64, "the shifted clock wraps exactly with the stamp");
/* Was allocated block x allocated after allocated block y? (Stamps wrap
 * after 2^24 allocations; the answer is then a guess, which only moves
 * where a block is carved from, never which block is chosen.) */
static inline int fit_allocated_after(const fit_block_t *x, const fit_block_t *y) {
  uint32_t d = (uint32_t)((x->size_flags >> FIT_STAMP_SHIFT) - (y->size_flags >> FIT_STAMP_SHIFT));
  d &= (1u << FIT_STAMP_BITS) - 1;
  return d != 0 && d < (1u << (FIT_STAMP_BITS - 1));
}


static inline void fit_add_free_bytes(fit_arena_t *a, long delta) {
  unsigned long v = atomic_load_explicit(&a->free_bytes, memory_order_relaxed);
  atomic_store_explicit(&a->free_bytes, v + (unsigned long)delta, memory_order_relaxed);
}

/* --- free index ---------------------------------------------------------
 * The dispatch (fit_index_insert / remove / resized / find) and the size bins
 * are static inline in fit_index.h and fit_size_index.h. */
/* Calls visit(b, ctx) for every block in the index; for the checker. */
void fit_index_each(fit_arena_t *a, void (*visit)(fit_block_t *, void *), void *ctx);

void fit_list_insert(fit_arena_t *a, fit_block_t *b);
void fit_list_remove(fit_arena_t *a, fit_block_t *b);
fit_block_t *fit_list_find(fit_arena_t *a, size_t need);

void fit_addr_tree_insert(fit_arena_t *a, fit_block_t *b);
void fit_addr_tree_remove(fit_arena_t *a, fit_block_t *b);
void fit_addr_tree_refresh(fit_arena_t *a, fit_block_t *b);
fit_block_t *fit_addr_tree_find(fit_arena_t *a, size_t need);
void fit_addr_tree_each(fit_block_t *root, void (*visit)(fit_block_t *, void *), void *ctx);

void fit_size_tree_insert(fit_arena_t *a, fit_block_t *b);
void fit_size_tree_remove(fit_arena_t *a, fit_block_t *b, size_t size);
fit_block_t *fit_size_tree_find(fit_arena_t *a, size_t need);

void fit_size_index_each(fit_arena_t *a, void (*visit)(fit_block_t *, void *), void *ctx);

/* Treap priority of a block: a hash of its address, so the shape of a tree
 * depends only on which blocks are in it (deterministic, no RNG state). */
static inline uint64_t fit_treap_priority(const fit_block_t *b) {
  uint64_t x = (uint64_t)(uintptr_t)b;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* --- the program break (fit_brk.c) -------------------------------------- */
/* Gets at least `need` bytes of new memory for the arena and returns it as a
 * free block of size >= need that ends the arena's top run, counted in
 * free_bytes but NOT in the free index. NULL with errno=ENOMEM when sbrk
 * fails. */
fit_block_t *fit_brk_grow(fit_arena_t *a, size_t need);
/* Bytes obtained from sbrk so far, all arenas. */
unsigned long fit_brk_segment_bytes(void);
/* The span of the break our sbrk calls obtained: from fit_brk_lo (the
 * first sbrk's result rounded down to FIT_ALIGN; the break only grows after
 * it), fit_brk_units units of FIT_ALIGN bytes. */
extern _Atomic uintptr_t fit_brk_lo __attribute__((visibility("hidden")));
extern _Atomic uintptr_t fit_brk_units __attribute__((visibility("hidden")));
/* Could p be a block of ours: aligned, not NULL, its header in that span?
 * A wild pointer (NULL + 16, the stack, an mmap) is refused before its
 * header is read (that read was a SIGSEGV); one inside the break is then
 * judged by its header's owner. One compare for all three: the offset
 * rotated right by 4 is small only when it is a multiple of 16 and below
 * the span. */
_Static_assert(FIT_ALIGN == 16 && FIT_HEADER_SIZE % FIT_ALIGN == 0, "the rotate by 4 checks 16-byte alignment");
static inline int fit_brk_may_own(const void *p) {
  uintptr_t units = atomic_load_explicit(&fit_brk_units, memory_order_acquire); /* units imply their lo */
  uintptr_t offset = (uintptr_t)p - FIT_HEADER_SIZE - atomic_load_explicit(&fit_brk_lo, memory_order_relaxed);
  return ((offset >> 4) | (offset << (sizeof offset * 8 - 4))) < units;
}
/* fork() support: take / release / reset the break lock (fit_api.c registers
 * them with pthread_atfork, after its own lock). */
void fit_brk_fork_prepare(void);
void fit_brk_fork_parent(void);
void fit_brk_fork_child(void);

/* --- the allocator over one arena (fit_arena.c) ------------------------- */
void fit_arena_prepare(fit_arena_t *a); /* chooses the index on first use */
void *fit_arena_malloc(fit_arena_t *a, size_t size);
void fit_arena_free(fit_arena_t *a, fit_block_t *b);
/* The same for an arena whose index is FIT_INDEX_SIZE_BINS (callers check). */
void *fit_bins_arena_malloc(fit_arena_t *a, size_t size);
void fit_bins_arena_free(fit_arena_t *a, fit_block_t *b);
/* Reports a bad free on stderr (without allocating). */
void fit_report_bad_free(const char *who, const void *ptr, const char *why);
void fit_warn_env(const char *name, const char *value, const char *expected);

/* --- implementation choice and arenas (fit_api.c) ----------------------- */
int fit_use_naive(void); /* TESSERA_FIT_IMPL=naive, read once */
void fit_register_fork_handlers(void); /* once, at the first use of any arena */
fit_arena_t *fit_arena_by_id(uint32_t id);
unsigned fit_arena_count(void); /* ids to scan: 1 .. FIT_ARENA_THREAD0+N */

/* --- invariant checker (fit_check.c), for tests ------------------------- */
/* Walks every run of the arena and its index; returns 0, or -1 and a
 * one-line description of the first violation in err. Not thread-safe. */
int fit_check_arena(fit_arena_t *a, char *err, size_t errlen);
/* The same over every arena in use. */
int fit_check_all(char *err, size_t errlen);

#endif
