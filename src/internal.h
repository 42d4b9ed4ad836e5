/* internal.h — the data structures and the internal interface shared by the
 * files of libtessera (names tes_* / TES_*; everything else is static).
 *
 * Geometry (checked by static assertions below):
 *   segment  4 MiB, aligned at 4 MiB; the owner of any block is found by
 *            masking its address (no per-object header). Its first bytes hold
 *            tes_segment_t and the page descriptors.
 *   page     a run of equal blocks: 64 KiB in small segments (classes up to
 *            8 KiB), 512 KiB in medium segments (up to 128 KiB). Page 0 of a
 *            segment holds the header and no blocks, so every block area
 *            starts at a multiple of the page size (aligned allocation relies
 *            on it). A large segment holds one block above 128 KiB.
 *   segmap   two bits per 4 MiB of the 47-bit address space (8 MiB of
 *            zero-filled BSS, touched only where segments live; it counts
 *            against `ulimit -v` whole): 1 = a segment starts here, 2 = the
 *            tail of a huge segment, 3 = a host of packed large blocks
 *            (large.c, TESSERA_LARGE_PACK). free()
 *            consults it before dereferencing anything, so a pointer no
 *            segment owns is recognised and refused.
 *            A thread's heap also keeps a table of the 64 KiB slices it owns:
 *            the free fast path checks that table instead (no shared load).
 *   heap     per-thread state; the thread-local pointer tes_tls_heap is the
 *            only TLS and starts as &tes_heap_empty, whose direct table points
 *            at a page with no free blocks: the fast path needs no NULL check.
 *
 * Block lists of a page (mimalloc's three-list design):
 *   free        blocks malloc pops (owner only)
 *   local_free  blocks the owner frees (pushed; moved to `free` when it runs dry)
 *   xthread_free blocks other threads free: a lock-free stack whose low two bits
 *               hold the delayed-free state (TES_TF_*), collected by the owner
 *               (hardened build: a bitmap a page instead, summarised here).
 *
 * `used` counts live blocks, with two tricks that keep the free fast path to a
 * single "--used == 0" test: the page at the head of its class queue (the one
 * the direct table points to) is "pinned" with +1, so freeing its last block
 * does not call out; a full page (moved to the heap's full queue) has used = 1
 * as a trigger and its true count is `reserved`, so the owner's first free
 * into it calls out and moves it back. */
#ifndef TES_INTERNAL_H
#define TES_INTERNAL_H

#include "../include/tessera.h"
#include "os.h"
#include "size_class.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef TES_SECURE
#define TES_SECURE 0
#endif
/* 1 in the shared drop-in libraries: the standard names are aliases in
 * alloc.c; 0 in the archives, where override.c defines them. */
#ifndef TES_STANDARD_ALIASES
#define TES_STANDARD_ALIASES 0
#endif

#define tes_likely(x) __builtin_expect(!!(x), 1)
#define tes_unlikely(x) __builtin_expect(!!(x), 0)
#define TES_NOINLINE __attribute__((noinline))
#define TES_INLINE static inline __attribute__((always_inline))
/* Code that runs once per thread (a heap's set-up, park, unpark, abandon),
 * at fork or to report an error: compiled for size and placed apart from
 * the hot code. The whole executable segment is resident in every process
 * (lib.fixed_cost_sizes), and these took 2.4 KiB more of it at -O2 (PERFORMANCE.md,
 * twenty-seventh session, txt27). Not for anything a malloc or free reaches
 * in a steady state: GCC then treats the paths that call it as unlikely. */
#define TES_COLD __attribute__((cold))
/* A zero array that a process touches a page or two of, if any, or a
 * kilobyte or more that a small program never touches (statistics, rings):
 * linked after every other zero variable (the x86-64 linker scripts put
 * .lbss after .bss, in the same segment), so that the small ones share
 * a few pages instead of lying between the arrays, each on a page of its
 * own that every process dirties (twenty-fourth session, lean24), or
 * spread over pages that hold 8 KiB of arrays and 1 KiB of what start-up
 * writes (twenty-sixth, start26). */
#if defined(__x86_64__) && defined(__ELF__)
#define TES_BIG_BSS __attribute__((section(".lbss")))
#else /* elsewhere the compiler may not know .lbss is zero (a file of 8 MiB) */
#define TES_BIG_BSS
#endif
/* A name of the public API (include/tessera.h): the library hides the rest. */
#define TES_API __attribute__((visibility("default")))

/* ---- geometry ------------------------------------------------------------ */
#define TES_SEGMENT_SHIFT 22
#define TES_SEGMENT_SIZE ((size_t)1 << TES_SEGMENT_SHIFT)
#define TES_SEGMENT_MASK (TES_SEGMENT_SIZE - 1)
#define TES_SMALL_PAGE_SHIFT 16
#define TES_MEDIUM_PAGE_SHIFT 19
#define TES_SMALL_PAGES (TES_SEGMENT_SIZE >> TES_SMALL_PAGE_SHIFT)   /* 64 */
#define TES_MEDIUM_PAGES (TES_SEGMENT_SIZE >> TES_MEDIUM_PAGE_SHIFT) /* 8 */
#define TES_ADDRESS_BITS 47
#define TES_SEGMAP_COUNT ((size_t)1 << (TES_ADDRESS_BITS - TES_SEGMENT_SHIFT))
#define TES_LARGE_OFFSET ((size_t)512) /* where a large block starts in its segment */
#define TES_SEGMENT_CACHE_MAX 1024 /* the most segments TESSERA_SEGMENT_CACHE may keep */
#define TES_EXTEND_BYTES ((size_t)8 * 1024) /* a page's free list grows by this much at a time */
#define TES_EXTEND_MIN_BLOCKS 4
/* A fresh page's first extension carves half as much in the default build:
 * a thread that allocates a few blocks of a class (most threads, for most
 * classes) touches one OS page of it, not two (1,000 idle threads: 50.9 ->
 * 46.9 MB). The hardened build keeps the whole: each extension shuffles,
 * and halving the first cost it 2.4 instructions a pair. */
#define tes_page_extend_bytes(page) \
  (!TES_SECURE && (page)->capacity == 0 ? TES_EXTEND_BYTES / 2 : TES_EXTEND_BYTES)
/* Blocks of an OS page or more are carved one at a time in the default
 * build: each carved block's link is a write into an OS page of its own,
 * so carving four faulted in memory for blocks the thread may never take
 * (a thread that exits, a page that empties first) and kept it resident:
 * under thread churn (mstress/8t) 15-20% of the page faults. Such a block
 * is written by its user anyway, so carving it when it is handed out
 * moves its fault, and adds none. The hardened build keeps four: its
 * shuffle needs them to randomise the order. */
#define tes_page_extend_min_blocks(block_size) \
  (!TES_SECURE && (block_size) >= tes_os_page_size() ? 1 : TES_EXTEND_MIN_BLOCKS)

static_assert(TES_SMALL_PAGES == 64, "free_mask is one 64-bit word");
static_assert(TES_SMALL_BLOCK_MAX * 8 <= ((size_t)1 << TES_SMALL_PAGE_SHIFT), ">= 8 blocks per small page");
static_assert(TES_MEDIUM_BLOCK_MAX * 4 <= ((size_t)1 << TES_MEDIUM_PAGE_SHIFT), ">= 4 blocks per medium page");
static_assert(TES_MAX_ALIGNMENT >= ((size_t)1 << 20), "the API promises 1 MiB alignments");

/* Thread ids of segments: a real heap has >= TES_TID_FIRST, so no thread's id
 * ever equals an abandoned or large segment's, nor the empty heap's (0). */
#define TES_TID_NONE ((uintptr_t)0)      /* tes_heap_empty */
#define TES_TID_SHARED ((uintptr_t)1)    /* abandoned segments, large segments */
#define TES_TID_FIRST ((uintptr_t)2)

/* xthread_free low-bit states (the delayed-free protocol, free.c). */
#define TES_TF_NORMAL ((uintptr_t)0)     /* remote frees push onto the page */
#define TES_TF_USE_DELAYED ((uintptr_t)1) /* page is full: next remote free goes to the heap */
#define TES_TF_FREEING ((uintptr_t)2)    /* a remote thread is pushing to page->heap now */
#define TES_TF_MASK ((uintptr_t)3)
/* The stack also counts its blocks in the word's top 16 bits (default
 * build; the hardened one keeps no stack, below: a page holds
 * at most 4,096 blocks, and blocks live below 2^TES_ADDRESS_BITS), so the
 * owner takes the whole stack, and knows its length, without walking it:
 * the walk was one dependent cache miss per block, each in a line the
 * freeing thread had just written. */
#define TES_TF_COUNT_SHIFT 48
#define TES_TF_COUNT_ONE ((uintptr_t)1 << TES_TF_COUNT_SHIFT)
#define TES_TF_LIST_MASK ((TES_TF_COUNT_ONE - 1) & ~TES_TF_MASK)
static_assert(TES_ADDRESS_BITS <= TES_TF_COUNT_SHIFT, "block addresses must leave the count bits free");
static_assert(((size_t)1 << TES_MEDIUM_PAGE_SHIFT) / 16 < ((size_t)1 << (64 - TES_TF_COUNT_SHIFT)),
              "a page's blocks fit the count bits");
static inline struct tes_block_s *tes_tf_list(uintptr_t tf) { return (struct tes_block_s *)(tf & TES_TF_LIST_MASK); }
static inline uint32_t tes_tf_count(uintptr_t tf) { return (uint32_t)(tf >> TES_TF_COUNT_SHIFT); }
#if TES_SECURE
/* The hardened build keeps no stack there (RELIABILITY.md, twenty-fifth
 * session, hrem25): a remote free sets its block's bit in the page's bitmap
 * (tes_page_remote_bits), after a summary bit in the list field (bits 2-33)
 * for the pair of bitmap words its bit is in, unless that one is set
 * already. The list field is nonzero exactly when remote frees wait, as a
 * stack's head was, so every "anything pending" test (tes_tf_list(tf) !=
 * NULL) reads the same; the count bits stay 0. The owner takes the bits with
 * independent loads instead of a chain of dependent misses. */
#define TES_TF_SUMMARY_SHIFT 2
/* The summary bit of bitmap word w (two words a bit: a 16-byte class's
 * small page has 4,096 blocks, 64 words, 32 summary bits). */
static inline uintptr_t tes_tf_summary_bit(size_t word) { return (uintptr_t)1 << (TES_TF_SUMMARY_SHIFT + word / 2); }
static inline uint32_t tes_tf_summary(uintptr_t tf) { return (uint32_t)(tf >> TES_TF_SUMMARY_SHIFT); }
#endif

typedef enum { TES_SEG_SMALL = 0, TES_SEG_MEDIUM = 1, TES_SEG_LARGE = 2 } tes_segment_kind_t;

typedef struct tes_block_s {
  struct tes_block_s *next;
} tes_block_t;

typedef struct tes_page_s tes_page_t;
typedef struct tes_segment_s tes_segment_t;

/* ---- page ------------------------------------------------------------------ */
/* Bookkeeping that no fast path of the hardened build reads: in the first
 * cache line in the default build (where it always was), after the list
 * links in the hardened one, whose free fast path needs the line's 8 bytes
 * for the block-test divisor instead. */
#define TES_PAGE_BOOKKEEPING                                                                        \
  uint8_t class_index;                                                                              \
  /* A byte of its own, not a bit beside the others: a remote free reads it                       \
   * (tes_owned_segment) while the owner rewrites the flag bits below, and                        \
   * bit-fields sharing a byte are one memory location (a data race). */                           \
  uint8_t in_use;              /* handed to a heap */                                               \
  uint8_t pinned : 1;          /* head of its class queue (+1 in used) */                           \
  uint8_t in_full : 1;         /* in the heap's full queue (used is a trigger) */                   \
  uint8_t mem_zero : 1;        /* never-carved part of the page reads as zero */                    \
  uint8_t free_is_zero : 1;    /* every block on `free` is zero beyond its link */                  \
  uint8_t purge_pending : 1;   /* retired and waiting in heap's purge list */                       \
  uint8_t purged : 1;          /* physical memory given back */                                     \
  uint8_t kept_empty : 1;      /* secure: emptied, on its heap's kept list (heap.c), counted in heap->kept_bytes */ \
  uint8_t trim_retired : 1;    /* retired by growth_trim (heap.c): a segment's growth purge spares it */ \
  uint8_t index;               /* position in the segment */                                        \
  uint32_t reserved;           /* blocks that fit in the page */

/* The first cache line holds everything both fast paths read, in the default
 * and in the hardened build (area, divisor and keys are the hardened free's
 * checks); the list links and statistics follow, and what other threads
 * write starts a line of its own. */
struct tes_page_s {
  tes_block_t *free;           /* fast path: malloc pops */
  tes_block_t *local_free;     /* fast path: owner's free pushes */
  uint32_t used;               /* live blocks (+1 pinned; 1 when in_full) */
  uint32_t capacity;           /* blocks carved so far (lazy extension) */
#if TES_SECURE
  /* ceil(2^64 / block_size) of the page's class (tes_secure_block_index; 0
   * for a large page, which no block test accepts): read from the page, not
   * from a table by class_index, it is one dependent load fewer per free. */
  uint64_t divisor;
#else
  TES_PAGE_BOOKKEEPING
#endif
  size_t block_size;
  uint8_t *area;               /* first block */
  union {
    uintptr_t keys[2];         /* secure build: link keys; keys[1] is also the canary */
    struct tes_bin_s *bin;     /* default build: the owner heap's bin of this class */
  };
  tes_page_t *next, *prev;     /* class queue, full queue or purge list */
  union {
    uint64_t installed;        /* in use: blocks ever placed on `free` (stats; folded when the page retires) */
    /* Hardened build, retired: the capacity the page had, which
     * tes_segment_page_free zeroes (so no block of it passes a block test)
     * and which a retired page's resident bytes are judged by (heap.c,
     * retired_bytes). tes_page_init sets installed again. */
    uint64_t retired_capacity;
  };
  uint64_t remote_collected;   /* remote frees collected (stats) */
  int64_t live_base;           /* live count when the stats above were last folded */
  int64_t purge_expire;        /* ms clock when a retired page may be purged */
  const void *corrupt_link;    /* secure build: a free block whose link was overwritten, to report */
#if TES_SECURE
  TES_PAGE_BOOKKEEPING
#endif
  /* What other threads write (remote frees) starts a new cache line, so
   * their CASes do not keep stealing the line of the owner's fast path. */
  _Atomic uintptr_t xthread_free __attribute__((aligned(64))); /* remote frees (tagged pointer, TES_TF_*) */
  _Atomic(struct tes_heap_s *) heap;
#if !TES_SECURE
  /* Copies, for other threads' frees, of what their checks read from the
   * first line (in_use and area as one word: `area` while in use, else
   * NULL, as a zeroed descriptor reads; `bin`), kept on this
   * line, which their CAS takes anyway: reading the first line itself
   * pulled the owner's hottest line to the freeing core on every remote
   * free and made the owner's next used++ wait for it back (mstress
   * split over the two cores: tcm27, docs/PERFORMANCE.md). */
  const uint8_t *_Atomic area_if_in_use;
  _Atomic(struct tes_bin_s *) bin_for_remote;
#endif
#if TES_SECURE
  /* The index + 1 of the block another thread freed last (0: none), which
   * the collect holds back (page.c, remote_bits_take): a hint, written by
   * every remote free before its bit, on the line its summary is on. */
  _Atomic uint32_t remote_last;
#endif
};
static_assert(offsetof(tes_page_t, next) == 64, "the fast-path fields fill exactly the first cache line");
static_assert(offsetof(tes_page_t, xthread_free) == 128, "the owner's fields fill two cache lines");

/* `capacity` is written by the page's owner (tes_page_extend raises it; a
 * page set up or retired sets it) while the hardened build's frees from
 * other threads read it for their block test (tes_secure_check_free): those
 * writes and reads are relaxed atomics (plain moves on x86-64), so there is
 * no data race. The owner's own reads stay plain, as on its fast path: no
 * other thread writes the field of a page the owner uses (the kept pages'
 * purge writes it under the purge lock, under which alone the owner reads
 * them again). Relaxed is enough: the value only grows while the page is in
 * use, and a block another thread frees was carved before the program
 * handed it over. */
#define tes_page_capacity_set(page, n) __atomic_store_n(&(page)->capacity, (uint32_t)(n), __ATOMIC_RELAXED)
TES_INLINE uint32_t tes_page_capacity_any_thread(const tes_page_t *page) {
  return __atomic_load_n(&page->capacity, __ATOMIC_RELAXED);
}

/* `in_use` likewise: the owner clears it when a page retires (at its last
 * free, and at thread exit, adoption and heap destruction, the exit's
 * collect among them) while another thread's free of a block of the page
 * reads it (free.c, page_holds; tes_report_unowned; the hardened
 * verdict), as a large block's free (large.c, under large_lock) clears
 * its page's while a second free of the block reads it
 * (tes_large_owned_block): only a second free does that (a page retires
 * with no live block), but a program in continue mode goes on after the report, so
 * the read must be defined (review22: ThreadSanitizer reported the clear
 * in tes_heap_page_retire against page_holds;
 * sanitize.lib_exit_double_free_race). Every write is a relaxed atomic
 * store (tes_page_init's is a release: tes_heap_visit), every read that
 * another thread may race a relaxed load: plain byte moves on x86-64. The
 * owner's own reads of its pages stay plain. Relaxed is enough: nothing
 * is published through the flag (tes_page_init's release is for
 * tes_heap_visit's walk); a free that reads it racing a retire is a free
 * of an already freed block, whichever value it reads, and only chooses
 * the path to the report (the hardened build's tag exchange and verdict
 * catch it on either). */
#if TES_SECURE
#define tes_page_in_use_set(page, v) __atomic_store_n(&(page)->in_use, (uint8_t)(v), __ATOMIC_RELAXED)
#else
/* in_use and its copy on the remote frees' line (area_if_in_use); `area`
 * must be set before a page goes into use. */
#define tes_page_in_use_set(page, v)                                                                 \
  do {                                                                                              \
    tes_page_t *page_in_use_ = (page);                                                              \
    bool in_use_ = (v) != 0;                                                                        \
    __atomic_store_n(&page_in_use_->in_use, (uint8_t)in_use_, __ATOMIC_RELAXED);                     \
    atomic_store_explicit(&page_in_use_->area_if_in_use,                                            \
                          in_use_ ? page_in_use_->area : NULL, memory_order_relaxed);                  \
  } while (0)
#endif
TES_INLINE bool tes_page_in_use_any_thread(const tes_page_t *page) {
  return __atomic_load_n(&page->in_use, __ATOMIC_RELAXED) != 0;
}

/* ---- segment ------------------------------------------------------------- */
struct tes_segment_s {
  _Atomic uintptr_t thread_id; /* owner thread's heap id; TES_TID_SHARED if none */
  uint32_t page_shift;         /* log2 of the page size (63 for large segments) */
  uint32_t kind;               /* tes_segment_kind_t */
  uint32_t page_count;         /* descriptors in pages[] */
  uint32_t used_pages;         /* pages handed to the heap */
  uint64_t free_mask;          /* bit i: page i is free (never bit 0) */
  uint64_t dirty_mask;         /* bit i: page i is free and not purged yet */
  size_t size;                 /* bytes mapped (multiple of 4 MiB) */
  size_t purged_bytes;         /* bytes given back to the OS (for `committed`) */
  struct tes_heap_s *heap;     /* owner heap (small/medium) */
  tes_segment_t *next, *prev;  /* heap's list, the cache, abandoned or large list */
  tes_segment_t *free_next, *free_prev; /* heap's segments with free pages */
  bool in_free_list;
  bool cache_purged;
  int64_t cache_expire;        /* ms clock when it entered the cache; once purged, of the purge */
  size_t large_offset;         /* large: block start offset */
  size_t dirty_end;            /* bytes from the start that may be non-zero */
  size_t clean_below;          /* secure large blocks: [header, clean_below) reads as zero */
  size_t large_guard;          /* secure: offset of a guard page moved by realloc (0: none) */
  size_t large_requested;      /* secure: a large block's requested size, or TES_FREED_TAG once freed */
  /* A large block's segment taken from the cache with dirty memory the
   * block does not cover (default build: a tail beyond the block; hardened
   * build, whose blocks end at the segment's end: a front before it): the
   * ms clock when that is purged (0: none pending), and its links in
   * large.c's list of such segments. */
  _Atomic int64_t tail_due;
  size_t tail_bytes;           /* its length */
  size_t tail_counted;         /* what of it large.c's pending total counts: its length, or its resident bytes */
  size_t tail_from;            /* the offset where it starts */
  tes_segment_t *tail_next, *tail_prev;
  uintptr_t cookie;            /* secure: proves the header is ours */
  tes_segment_t *all_next, *all_prev; /* every small/medium segment (stats, visit) */
  bool in_all_list;
  bool lazy_zero, lazy_purged; /* small/medium: memory state of the pages whose descriptor is not set up yet */
  bool tail_estimated;         /* large: tail_counted is large.c's estimate, not mincore's count (in padding) */
  uint64_t desc_ready;         /* small/medium: bit i: pages[i] is set up (segment.c, desc_setup) */
  tes_page_t pages[];
};

typedef struct tes_page_queue_s {
  tes_page_t *first, *last;
} tes_page_queue_t;

/* Counters a heap keeps (all updated on slow paths only, never atomically). */
typedef struct tes_counters_s {
  uint64_t calloc_calls, realloc_calls, aligned_calls, failed_calls;
  uint64_t malloc_failed;      /* malloc-family calls that returned NULL */
  uint64_t other_allocs;       /* blocks allocated by calloc/aligned/realloc (not malloc) */
  uint64_t other_frees;        /* blocks freed by realloc (not free) */
  uint64_t slow_allocs;        /* small allocations that took the slow path */
  uint64_t remote_frees;       /* frees this thread made into other threads' pages */
  uint64_t delayed_processed;  /* remote frees handed over through the delayed list */
  uint64_t realloc_in_place, huge_remaps;
  uint64_t large_allocs, large_frees;
  uint64_t class_allocs[TES_CLASS_COUNT];      /* folded from pages */
  uint64_t class_local_frees[TES_CLASS_COUNT]; /* folded from pages */
  uint64_t class_remote_collected[TES_CLASS_COUNT];
} tes_counters_t;

/* ---- bins ------------------------------------------------------------------ */
/* A heap's bin of one class (default build only): the blocks its thread
 * freed last, reused last-in first-out before any page's free list. Pages
 * hand back blocks in page order, so a block freed now comes back only after
 * its page's turn comes round again, long out of cache; the bin hands it back
 * at the next malloc of its class, still in L1 (tcmalloc's thread cache does
 * the same). Blocks in a bin stay counted in their page's `used`, so a bin
 * pins at most `limit` blocks (256 KiB worth, heap.c's bin_limit; up to 1
 * MiB worth while grown, bin_grow); the bins
 * go back to their pages on collect, trim, heap detach, thread exit and,
 * once per purge delay, on a malloc slow path or a free whose room ran
 * out (tes_bin_room_out). The room left is 16 bits of `tally`, which the
 * free fast path tests alone. */
typedef struct tes_bin_s {
  tes_block_t *head;
  /* Pops, room (pushes left) and drift: a pop adds TES_BIN_POP, one
   * instruction for all (below, TES_BIN_ROOM_BITS). */
  uint64_t tally;
  uint32_t limit;              /* room when empty (at most 64, TES_BIN_GROWN_BLOCKS grown: heap.c, bin_grow) */
  uint32_t most;               /* default build: what bin_grow may raise limit to (set with it) */
} tes_bin_t;
static_assert(sizeof(tes_bin_t) == 24, "a bin is three words");
#if TES_SECURE
/* The hardened build's bins, for the medium classes (above 8 KiB; pages of
 * a few blocks, which ran dry on most mallocs of fit-large): out of band,
 * an array of block addresses per class in the heap struct, never a link
 * in a freed block, so a write after free cannot forge an entry. free
 * appends (the block already carries the freed tag: a second free is still
 * found by its size word) and writes its page's encoded NULL into the
 * block's first word; malloc takes a random slot below the top one and
 * fills the hole from the top two, so the block freed last is never the
 * next one handed out, and checks both words (alloc_inline.h,
 * TES_SBIN_POP_OR_RETURN). A bin pops only with two blocks or more.
 * Blocks in a bin stay counted in their page's `used`, as the default
 * build's do; the bins go back to their pages where the default build's do
 * (collect, trim, heap detach, thread exit) and once per purge delay on a
 * malloc slow path (heap_deferred_eighth). 256 bytes a class. The small
 * classes have none: their pages' lists are cheaper in instructions than
 * any bin that keeps these guarantees (docs/RELIABILITY.md, nineteenth
 * session). */
#define TES_SBIN_SLOTS 30
typedef struct tes_sbin_s {
  uint32_t count;              /* blocks held: slot[0 .. count-1]; slot[count-1] freed last */
  uint32_t limit;              /* at most TES_SBIN_SLOTS (0: off) */
  uint64_t pops;               /* mallocs served (stats: folded into the heap's counters) */
  tes_block_t *slot[TES_SBIN_SLOTS];
} tes_sbin_t;
static_assert(sizeof(tes_sbin_t) == 256, "a bin's address is its class shifted by 8");
/* Only the medium classes have one: heap->sbins[c - TES_MEDIUM_CLASS_FIRST]
 * (tes_sbin_of; the struct held one for every class before, 12 KiB of
 * bins never used, written at every heap setup). */
#endif
/* tally, from the low bits: a drift byte, the room (pushes left, 16
 * bits, which the free fast path tests alone, at byte 1), the pops since
 * the last fold (heap.c, bin_fold_one). A push subtracts TES_BIN_ROOM_ONE;
 * a pop adds TES_BIN_POP, one instruction for all three: a pop, a push's
 * room back, and 1 off the drift byte (255 after a fold), which borrows 1
 * of that room back once in 256 pops (the 256th after a fold, the 512th,
 * ...; with the first, a full bin's pop gave no room back and every free
 * of a pop-free alternation at a full bin called out). So the
 * room runs out by itself, held or not: after about 256 pops a block of
 * room that was free, also in a loop whose blocks all fit its bins, which
 * takes no malloc slow path. The free that finds the room at zero with
 * room borrowed (256 pops or more counted: the bin may not be full; with
 * fewer, room zero is a full bin, and the block goes to its page) calls
 * tes_bin_room_out (heap.c): the pops
 * go to the heap's counters, the room is limit - held again and, once per
 * purge delay, the heap's deferred work runs (the bins' flush, the queue
 * sweep, the purges: lib.api_idle_class_rss and
 * security.default_remote_emptied_rss with bins past 255 blocks). Until
 * the twenty-second session the room was the low byte and a pop added 1
 * to it, exactly: a loop that fit its bins never ran out. held = limit -
 * room - drift, drift = pops / 256. */
#define TES_BIN_DRIFT_BITS 8
#define TES_BIN_ROOM_BITS 16
#define TES_BIN_ROOM_ONE ((uint64_t)1 << TES_BIN_DRIFT_BITS)
#define TES_BIN_ROOM_MASK ((((uint64_t)1 << TES_BIN_ROOM_BITS) - 1) << TES_BIN_DRIFT_BITS)
#define TES_BIN_POPS_SHIFT (TES_BIN_DRIFT_BITS + TES_BIN_ROOM_BITS)
#define TES_BIN_POP (((uint64_t)1 << TES_BIN_POPS_SHIFT) + TES_BIN_ROOM_ONE - 1)
#define TES_BIN_POPS_ONE ((uint64_t)1 << TES_BIN_POPS_SHIFT)
/* A bin's tally with `room` and no pops since its fold (the drift byte full). */
#define TES_BIN_TALLY(room) (((uint64_t)(room) << TES_BIN_DRIFT_BITS) | (TES_BIN_ROOM_ONE - 1))
/* The room as the free fast path reads it, alone (alloc_inline.h). */
typedef uint16_t __attribute__((may_alias, aligned(1))) tes_bin_room_t; /* at byte 1 */
static_assert(sizeof(tes_bin_room_t) * 8 == TES_BIN_ROOM_BITS && TES_BIN_DRIFT_BITS == 8,
              "the fast path reads the whole room, at byte 1");
/* The most blocks a grown bin may hold (heap.c, bin_grow; halved for the
 * eighths), besides its 1 MiB worth. 255 until the twenty-second session
 * (the room was a byte): a program that frees, then allocates, more than
 * that of a small class at a time (bench_batch: about 1,250 blocks of each
 * of 16 classes) had its bins keep each round's first frees, the coldest,
 * and its pages the rest, which emptied, retired and were carved again
 * (PERFORMANCE.md, twenty-second session). */
#define TES_BIN_GROWN_BLOCKS 4096
static_assert(TES_BIN_GROWN_BLOCKS < ((uint64_t)1 << TES_BIN_ROOM_BITS), "a grown bin's room fits");
static inline uint32_t tes_bin_room(const tes_bin_t *bin) {
  return (uint32_t)((bin->tally & TES_BIN_ROOM_MASK) >> TES_BIN_DRIFT_BITS);
}
static inline uint64_t tes_bin_pops(const tes_bin_t *bin) { return bin->tally >> TES_BIN_POPS_SHIFT; }
/* The room the drift byte has borrowed since the last fold: one a 256 pops. */
static inline uint64_t tes_bin_drift_of(uint64_t tally) { return (tally >> TES_BIN_POPS_SHIFT) >> TES_BIN_DRIFT_BITS; }
static inline uint32_t tes_bin_held(const tes_bin_t *bin) {
  /* A walk of another thread's heap (stats) may read a limit that its
   * owner changes at that moment (bin_grow, bins_set_limits): never a
   * count below zero. */
  uint64_t tally = bin->tally;
  uint64_t used = ((tally & TES_BIN_ROOM_MASK) >> TES_BIN_DRIFT_BITS) + tes_bin_drift_of(tally);
  uint32_t limit = bin->limit;
  return used < limit ? limit - (uint32_t)used : 0;
}
/* The room set, pops and drift kept (their caller folded them, or must keep them). */
static inline void tes_bin_set_room(tes_bin_t *bin, uint32_t room) {
  bin->tally = (bin->tally & ~TES_BIN_ROOM_MASK) | ((uint64_t)room << TES_BIN_DRIFT_BITS);
}
extern tes_bin_t tes_bin_closed; /* room 0: pages no bin may take blocks of */
/* The head of every empty bin, never handed out: its mark (1) is no bin's
 * address, so the pop's one test of the head's mark also finds the bin
 * empty (TES_BIN_POP_OR_RETURN), and the hit path tests nothing else. */
extern const uintptr_t tes_bin_end_words[2];
#define TES_BIN_END ((tes_block_t *)tes_bin_end_words)
/* A binned block's second word holds its bin's address (every class is at
 * least 16 bytes); zero once it leaves the bin (alloc_inline.h, free). */
static inline uintptr_t *tes_bin_mark(tes_block_t *block) { return (uintptr_t *)block + 1; }
/* The same word of a block on its heap's delayed list (default build):
 * the address of its page's xthread_free, written at the delayed push,
 * zeroed when the owner takes the block (tes_heap_process_delayed) or
 * drops the list (tes_heap_free_all). A second remote free of the block
 * before then finds it there (tes_free_remote): it would go onto the
 * page's stack over the delayed link (review20, twentieth session). */
static inline uintptr_t tes_delayed_mark(const tes_page_t *page) { return (uintptr_t)&page->xthread_free; }
/* free.c: an owner's free of a medium block that carries its full bin's
 * mark: a double free if the bin holds it (reported), else freed as usual. */
void tes_free_owned_checked(tes_page_t *page, tes_bin_t *bin, tes_block_t *block);
/* A free found the bin's room at zero with pops counted since its last
 * fold (the bin not full, or not known to be: heap.c). */
void tes_bin_room_out(tes_page_t *page, tes_bin_t *bin, tes_block_t *block);
/* heap.c: the bin's head lacks its mark (a double free; see
 * TES_BIN_POP_OR_RETURN): reported, and the bin emptied without following
 * its links. tes_bin_refuse_malloc then serves the malloc of `size` that
 * found it. */
void tes_bin_refuse(tes_bin_t *bin);
void *tes_bin_refuse_malloc(struct tes_heap_s *heap, tes_bin_t *bin, size_t size);

/* Where the owner's frees into page go first: its heap's bin of its class,
 * or tes_bin_closed for a page no heap holds. Nothing in the hardened build,
 * whose pages keep their link keys in that word. */
static inline void tes_page_set_bin(tes_page_t *page, tes_bin_t *bin) {
#if TES_SECURE
  (void)page, (void)bin;
#else
  /* Atomic (a plain store on every target) because a remote free reads it
   * (tes_free_remote's check of a binned block's mark). */
  __atomic_store_n(&page->bin, bin, __ATOMIC_RELAXED);
  atomic_store_explicit(&page->bin_for_remote, bin, memory_order_relaxed);
#endif
}

/* ---- heap ------------------------------------------------------------------ */
#define TES_SLICE_SHIFT 16 /* 64 KiB slices */
#define TES_SLICE_SLOTS 8192 /* 512 MiB of slices (1024, 64 MiB, until the seventeenth session) */
/* A slice's number is its address plus the bias, over 64 KiB: then no user
 * address has the number 0 (only 0xffffffff80010000 and the 64 KiB above,
 * kernel addresses), so an all-zero table misses every user pointer, NULL
 * included: tes_slices_none, the static heap's table, is zero (.bss) but
 * for slot 0's tag, which tes_process_init sets as a real heap's. The
 * bias is a multiple of the slice, and `lea` adds it for free. */
#define TES_SLICE_BIAS ((uintptr_t)0x7fff0000)
/* A thread's slice table (tes_heap_t.slices): the tags (slice numbers;
 * empty slots hold one no slice has) and the pages. Apart from the heap
 * struct, so that the static heap (tes_heap_empty), which must be in .data, points at a
 * zero table in .bss instead of carrying 128 KiB of it in .data (resident
 * whole, by the kernel's fault-around, as soon as a page near it is read). */
#define TES_SLICE_TAG_RUN 512 /* tags a bit of tag_runs_written covers: 4 KiB */
typedef struct tes_slices_s {
  /* Bit i: a tag in tags [512 i, 512 i + 512) was set since the table was
   * last cleared. A pooled heap clears only those 4 KiB runs: reading all
   * 64 KiB of tags cost larson, whose threads come and go, half of its
   * last-level read misses. First, in the page of tag[0] (which
   * tes_heap_setup writes) and of the heap struct's tail: at the end of the
   * table it made every thread that allocated fault in one more page (4 KiB
   * resident a thread, one fault of a small program's start; PERFORMANCE.md,
   * twenty-first session). Its own line: the tags stay line-aligned. */
  uint16_t tag_runs_written;
  _Alignas(64) uintptr_t tag[TES_SLICE_SLOTS];
  /* Read only after its tag matched: never zeroed as a whole. The page,
   * and in the default build page->bin, copied (tes_slice_set,
   * tes_segment_page_bin): the free fast path loads the bin beside the page
   * instead of through it, so the address of the bin's head, which the push
   * stores to, waits on one load after the tag's instead of two (`single`
   * ran 0.8 of the time). Beside the page, in the same line: a thread that
   * uses a few slots touches no more pages of the table (a separate array
   * made 1,000 idle threads 4 MB larger). Invariant: for a slot whose tag
   * is set, entry[i].bin == entry[i].page->bin (default build). */
  struct {
    struct tes_page_s *page;
#if !TES_SECURE
    struct tes_bin_s *bin;
#endif
  } entry[TES_SLICE_SLOTS];
} tes_slices_t;
_Static_assert(TES_SLICE_SLOTS / TES_SLICE_TAG_RUN <= 16, "tag_runs_written has a bit for every 4 KiB of tags");
extern tes_slices_t tes_slices_none; /* init.c: every lookup misses once the process is set up */
/* A spin lock that knows its holder (the address of the holding thread's
 * tes_tls_heap slot, as tes_fork_holder names a thread; NULL when free), so
 * that a thread asking for a lock it holds already, which would wait for
 * ever, is reported instead: malloc from a signal handler that interrupted
 * the allocator on its own thread (tes_lock_reentered). */
typedef struct tes_lock_s {
  _Atomic(const void *) holder;
} tes_lock_t;
#define TES_LOCK_INIT {NULL}

struct tes_heap_s {
  tes_page_t *direct[TES_DIRECT_COUNT]; /* fast path: size -> page with free blocks */
  tes_bin_t *direct_bin[TES_DIRECT_COUNT]; /* default build: size -> its class's bin */
  tes_bin_t bins[TES_CLASS_COUNT];      /* default build: recently freed blocks per class */
  /* Free fast path: the 64 KiB slices of the pages in use in segments this
   * thread owns (entered when a page is handed out, removed when it
   * retires: segment.c), direct-mapped by tes_slice_of(address) % 8192: slices->tag holds the
   * slice number, slices->page its page (the table follows the heap struct
   * in its allocation: tes_heap_alloc_struct). Kept only in a thread's default heap
   * (its first-class heaps register there too); a slice missing here, after
   * a collision, simply takes the slow path. A tag match proves the pointer
   * lies in one of our own pages before anything is dereferenced. An empty
   * slot holds a tag no slice has (0, or UINTPTR_MAX in slot 0: see
   * tes_heap_setup). */
  tes_slices_t *slices;
  uintptr_t thread_id;                  /* owner thread's id (shared by its heaps) */
  tes_page_queue_t queues[TES_CLASS_COUNT];
  tes_page_queue_t full;
  _Atomic(tes_block_t *) delayed_free;  /* remote frees into full pages */
  tes_segment_t *segments;              /* small and medium segments */
  tes_segment_t *free_segments[2];      /* segments with a free page, per kind */
  /* Retired pages in expiry order. The purge list, and the free and dirty
   * state of the heap's segments' pages, are also touched by the purge
   * thread (TESSERA_PURGE_THREAD, purge.c), so they change only under
   * purge_lock; purge_due (ms clock, INT64_MAX: nothing) is the list head's
   * expiry, readable without the lock. */
  tes_page_queue_t purge;
  tes_lock_t purge_lock;
  _Atomic int64_t purge_due;
  _Atomic int64_t kept_purge_due;       /* secure: see `kept` below */
  uint64_t slow_count;
#if TES_SECURE
  uint32_t quick_refills;                /* tes_heap_malloc_miss's refills from local_free (every eighth runs heap_deferred first) */
#endif
  int64_t bins_due;                     /* ms clock: next flush of the bins (slow path) */
  size_t bins_grown;                    /* default build: bytes bin_grow added to the limits since the last flush */
  int64_t queues_sweep_due;             /* ms clock: next look for queued pages others emptied (slow path) */
  /* Hardened build: pages whose last block the owner freed, kept for
   * reuse without carving (heap.c, "kept empty pages"), a list per class.
   * Off the class queues, so no fast path reaches them; the lists change only under
   * purge_lock (only the owner adds or removes pages), and another thread
   * may, under that lock, give a kept page's memory back in place (it stays
   * on its list, in use, marked purged: the owner carves it afresh when it
   * takes it back). kept_purge_due (ms clock, INT64_MAX: nothing) says when
   * other threads may do so, readable without the lock. */
  tes_page_queue_t kept[TES_CLASS_COUNT];
  size_t kept_bytes;                    /* secure, owner only: bytes of the pages on the kept list */
  int64_t keep_due;                     /* secure, owner only: ms clock when the kept pages retire (heap.c) */
  int64_t keep_purge_at;                /* secure, owner only: kept_purge_due for pages kept before keep_due */
  bool keep_open;                       /* secure, owner only: keep_due is set (a page was kept since the last retiring) */
  bool keep_restart;                    /* secure, owner only: every kept page was taken back since keep_due was set */
  struct tes_heap_s *all_next, *all_prev; /* every heap in the process */
  unsigned sweep_pins;                  /* heap.c, under the heaps lock: walks working on it with that lock let go */
  struct tes_heap_s *late_next, *late_prev; /* init.c: the late list (no key destructor may abandon it) */
  long late_tid;                        /* init.c: its thread's kernel id while on the late list, else 0 */
  struct tes_heap_s *park_next;         /* heap.c: the parked list (a default heap whose thread exited) */
  int64_t park_time;                    /* heap.c: ms clock when it was parked */
  struct tes_heap_s *thread_default;    /* the creating thread's default heap */
  _Atomic uint32_t first_class_heaps;   /* default heap: its thread's first-class heaps not destroyed or deleted yet
                                         * (atomic: another thread may destroy or delete one while its thread makes more) */
  _Atomic uint32_t first_class_deleted; /* default heap: those another thread deleted, which this thread moves in
                                         * (tes_heap_process_deletes): only the owner may touch their pages */
  _Atomic bool delete_requested;        /* first-class heap: deleted or destroyed by another thread, not done yet */
  _Atomic bool destroy_requested;       /* first-class heap: that request is a destroy (its blocks are freed) */
  bool is_default;
  bool is_static;
  bool growth_trimming;                 /* owner only: in growth_trim (heap.c), its retired pages are marked */
  uint8_t room_outs;                    /* default build: tes_bin_room_out's calls, modulo 256 (heap.c) */
  uintptr_t keys[2];                    /* secure: delayed-list link keys (random, set once in tes_heap_setup) */
  uint64_t random;                      /* secure: xorshift state */
#if TES_SECURE
  uint64_t bin_random;                  /* secure: the bins' pops, linear congruential (high half drawn) */
  tes_sbin_t sbins[TES_CLASS_COUNT - TES_MEDIUM_CLASS_FIRST]; /* secure: recently freed blocks per medium class, out of band (tes_sbin_of) */
#endif
  tes_counters_t counters;
  tes_page_t *idle_head[TES_CLASS_COUNT]; /* class head found empty at the last queues_sweep, no slow path of the class since (heap.c) */
  unsigned visit_depth;                 /* default heap: its thread's tes_heap_visit walks under way (heap_visit.c) */
  signed char visit_collect;            /* default heap: a tes_collect asked during them: -1 none, else its force */
};
typedef struct tes_heap_s tes_heap_t;
#if TES_SECURE
/* The hardened bin of medium class c (c >= TES_MEDIUM_CLASS_FIRST). */
TES_INLINE tes_sbin_t *tes_sbin_of(tes_heap_t *heap, unsigned c) { return &heap->sbins[c - TES_MEDIUM_CLASS_FIRST]; }
#endif

/* The slice table: the 64 KiB slice of p, its slot, and the lookup and
 * update that the free fast path, realloc and the segments share. */
TES_INLINE uintptr_t tes_slice_of(const void *p) { return ((uintptr_t)p + TES_SLICE_BIAS) >> TES_SLICE_SHIFT; }
TES_INLINE size_t tes_slice_slot(uintptr_t slice) { return slice & (TES_SLICE_SLOTS - 1); }
#if TES_SECURE
/* Hardened build: the tag of a medium segment's slice carries this bit (no
 * slice number has it: addresses are below 2^48), so that the free fast
 * path's one tag compare both finds a small page and tells it from a
 * medium one, whose blocks keep their size word elsewhere and go to a bin:
 * the compare of the page's block size with 8 KiB it replaces was two
 * instructions on every small free (RELIABILITY.md, twenty-second
 * session, hfree22). A medium free pays a second compare on the miss. */
#define TES_SLICE_MEDIUM ((uintptr_t)1 << 63)
/* What the caller knows of a small/medium page's kind (a constant where
 * it knows it: no compare of the block size with 8 KiB). The functions
 * below that take `bool small` take these too: true is TES_KIND_SMALL. */
#else
#define TES_SLICE_MEDIUM ((uintptr_t)0)
#endif
/* (Both builds: the link helpers take them too; the default build ignores them.) */
#define TES_KIND_ANY 0u
#define TES_KIND_SMALL 1u
#define TES_KIND_MEDIUM 2u
/* The tag p's slice has in the table while it names the slice's page:
 * the slice number, with TES_SLICE_MEDIUM for a medium segment's. */
TES_INLINE uintptr_t tes_slice_tag(uintptr_t slice, const tes_page_t *page) {
#if TES_SECURE
  const tes_segment_t *seg = (const tes_segment_t *)((uintptr_t)page & ~(uintptr_t)(TES_SEGMENT_SIZE - 1));
  return seg->kind == TES_SEG_MEDIUM ? slice | TES_SLICE_MEDIUM : slice;
#else
  (void)page;
  return slice;
#endif
}
/* Does the table hold p's slice (which proves p lies in a page of this
 * thread's own segments; nothing at p is read)? Its page is then
 * slices->entry[*slot].page. */
TES_INLINE bool tes_slice_hit(const tes_slices_t *slices, const void *p, size_t *slot) {
  uintptr_t slice = tes_slice_of(p);
  *slot = tes_slice_slot(slice);
  return (slices->tag[*slot] & ~TES_SLICE_MEDIUM) == slice;
}
#if TES_SECURE
/* i, through an empty asm: computed where it is used, not earlier. */
TES_INLINE size_t tes_opaque_index(size_t i) {
  __asm__("" : "+r"(i));
  return i;
}
/* tes_slice_hit, telling the page's kind (hardened build): TES_KIND_SMALL
 * or TES_KIND_MEDIUM when the table holds p's slice, else 0. The
 * small page's tag is compared first, in memory; the medium one's after a
 * miss, loaded again through an index GCC cannot see is the same: kept in
 * a register, or its address computed before the first compare, it cost
 * every small free an instruction. */
TES_INLINE unsigned tes_slice_kind(const tes_slices_t *slices, const void *p, size_t *slot) {
  uintptr_t slice = tes_slice_of(p);
  *slot = tes_slice_slot(slice);
  if (tes_likely(slices->tag[*slot] == slice)) return TES_KIND_SMALL;
  if (tes_likely(slices->tag[tes_opaque_index(*slot)] == (slice | TES_SLICE_MEDIUM))) return TES_KIND_MEDIUM;
  return 0;
}
#endif
/* The slice's slot now names page (a collision may have taken it). */
TES_INLINE void tes_slice_set(tes_heap_t *heap, uintptr_t slice, tes_page_t *page) {
  heap->slices->tag[tes_slice_slot(slice)] = tes_slice_tag(slice, page);
  heap->slices->entry[tes_slice_slot(slice)].page = page;
#if !TES_SECURE
  heap->slices->entry[tes_slice_slot(slice)].bin = page->bin;
#endif
  heap->slices->tag_runs_written |= (uint16_t)(1u << (tes_slice_slot(slice) / TES_SLICE_TAG_RUN));
}

/* ---- globals ------------------------------------------------------------- */
extern __thread tes_heap_t *tes_tls_heap __attribute__((tls_model("initial-exec")));
/* Always tes_tls_heap->slices (set together, init.c), in a TLS slot of its
 * own so that the free fast path's tag load waits on one load, not on the
 * heap's and then its table pointer's (threads and larson ran 2.5-4%
 * slower with the extra link in the chain, same instruction count). */
extern __thread tes_slices_t *tes_tls_slices __attribute__((tls_model("initial-exec")));
extern tes_heap_t tes_heap_empty;
/* Set when the thread's heap was abandoned at its exit (init.c,
 * thread_done), whose TLS heap is then tes_heap_empty again: a malloc from
 * a later destructor gets a heap on the late list, a free does not make one
 * just to count itself. A second static heap served for this, 7 KiB of
 * .data and 196 relocations in every process (PERFORMANCE.md, twenty-sixth
 * session, start26). */
extern __thread bool tes_tls_exited __attribute__((tls_model("initial-exec")));
/* The thread never had a heap (and is not past its exit). */
TES_INLINE bool tes_thread_unstarted(void) { return tes_tls_heap == &tes_heap_empty && !tes_tls_exited; }
extern tes_page_t tes_page_empty;
extern uint8_t tes_segmap[TES_SEGMAP_COUNT / 4]; /* 2 bits a unit, 4 units a byte */
extern long tes_option_values[TES_OPTION_COUNT];

/* ---- spin lock (slow paths only; fork handlers reset them) --------------- */
/* From our fork prepare handler to our parent or child handler, the forking
 * thread holds every allocator lock, and its own lock calls are no-ops:
 * other libraries' fork handlers run in that window and may allocate (glibc
 * takes its malloc locks after every prepare handler; a pthread_atfork
 * handler cannot). The thread is named by the address of its tes_tls_heap
 * slot, which keeps our thread-local state to that one pointer. */
extern _Atomic(tes_heap_t *const *) tes_fork_holder;
static inline bool tes_holds_fork_locks(void) {
  return tes_unlikely(atomic_load_explicit(&tes_fork_holder, memory_order_relaxed) == &tes_tls_heap);
}
/* The calling thread holds `lock` and asks for it again: one line on
 * stderr, then abort, whatever TESSERA_ABORT_ON_ERROR says (going on would
 * wait for ever). free.c. */
_Noreturn void tes_lock_reentered(const tes_lock_t *lock);
/* Read-modify-writes other threads may race with (not the hot paths'):
 * atomic, a locked instruction, once the process has a second thread;
 * before that the same instruction without the lock prefix (x86-64),
 * still one instruction, so a signal handler on this thread finds it done
 * or not begun, and without the locked one's wait for every store before
 * it (with the locks, 18 a 200 KiB + 2 MiB malloc/free cycle: locked_ops.c).
 * The asm's memory clobber orders it as the release the atomic one is. */
#if defined(__x86_64__)
#define TES_RMW_SINGLE(insn, p, v, type, constraint)                                              \
  do {                                                                                           \
    if (tes_single_threaded()) {                                                                 \
      __asm__ volatile(insn " %1, %0" : "+m"(*(type *)(p)) : constraint((type)(v)) : "memory"); \
      return;                                                                                    \
    }                                                                                            \
  } while (0)
#else
#define TES_RMW_SINGLE(insn, p, v, type, constraint) ((void)0)
#endif
TES_INLINE void tes_rmw_or64(_Atomic uint64_t *p, uint64_t v) {
  TES_RMW_SINGLE("orq", p, v, uint64_t, "r");
  atomic_fetch_or_explicit(p, v, memory_order_release);
}
TES_INLINE void tes_rmw_and64(_Atomic uint64_t *p, uint64_t v) {
  TES_RMW_SINGLE("andq", p, v, uint64_t, "r");
  atomic_fetch_and_explicit(p, v, memory_order_release);
}
TES_INLINE void tes_rmw_or8(uint8_t *p, uint8_t v) {
  TES_RMW_SINGLE("orb", p, v, uint8_t, "q");
  __atomic_fetch_or(p, v, __ATOMIC_RELEASE);
}
TES_INLINE void tes_rmw_and8(uint8_t *p, uint8_t v) {
  TES_RMW_SINGLE("andb", p, v, uint8_t, "q");
  __atomic_fetch_and(p, v, __ATOMIC_RELEASE);
}
/* A relaxed compare-and-swap of a 32-bit word: *expected gets what was there. */
TES_INLINE bool tes_rmw_cas32(uint32_t *p, uint32_t *expected, uint32_t desired) {
#if defined(__x86_64__)
  if (tes_single_threaded()) {
    bool done;
    __asm__ volatile("cmpxchgl %3, %1" : "=@ccz"(done), "+m"(*p), "+a"(*expected) : "r"(desired) : "memory");
    return done;
  }
#endif
  return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
/* The wait for a lock another thread holds (free.c): out of line, one copy
 * of the spin for every lock site. */
void tes_lock_contended(tes_lock_t *lock);
static inline bool tes_trylock(tes_lock_t *lock) {
  if (tes_holds_fork_locks()) return true;
  const void *holder = atomic_load_explicit(&lock->holder, memory_order_relaxed);
  if (tes_unlikely(holder != NULL)) return false;
  /* No other thread to keep out: no locked instruction, which waits for
   * every store before it (the program's writes to cold blocks: `mixed`
   * spent a fifth of its samples on large_lock's cmpxchg). The compiler
   * fence keeps the critical section after the take, for a signal handler
   * on this thread (which finds the lock held: re-entry). */
  if (tes_single_threaded()) {
    atomic_store_explicit(&lock->holder, (const void *)&tes_tls_heap, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    return true;
  }
  return atomic_compare_exchange_strong_explicit(&lock->holder, &holder, (const void *)&tes_tls_heap,
                                                 memory_order_acquire, memory_order_relaxed);
}
static inline void tes_lock(tes_lock_t *lock) {
  if (tes_unlikely(!tes_trylock(lock))) tes_lock_contended(lock);
}
static inline void tes_unlock(tes_lock_t *lock) {
  if (tes_holds_fork_locks()) return;
  atomic_store_explicit(&lock->holder, NULL, memory_order_release);
}
static inline void tes_lock_reset(tes_lock_t *lock) { atomic_store(&lock->holder, NULL); }
#ifdef TES_FAULT_INJECTION
/* Test builds (fault.h, tes_fault_locked_syscalls): does the calling thread hold it? */
static inline bool tes_lock_mine(const tes_lock_t *lock) {
  return atomic_load_explicit(&lock->holder, memory_order_relaxed) == (const void *)&tes_tls_heap;
}
bool tes_segment_locks_mine(void); /* segment.c: the cache's, the segment list's, the abandoned list's */
bool tes_large_lock_mine(void);    /* large.c */
#endif

/* ---- small helpers --------------------------------------------------------- */
static inline long tes_opt(tes_option_t o) { return tes_option_values[o]; }

TES_INLINE tes_segment_t *tes_segment_of(const void *p) {
  return (tes_segment_t *)((uintptr_t)p & ~(uintptr_t)TES_SEGMENT_MASK);
}
/* What the segment map says of a 4 MiB unit (two bits). */
enum {
  TES_UNIT_NONE = 0,  /* none of our segments starts here or covers it */
  TES_UNIT_START = 1, /* the start of one of our segments */
  TES_UNIT_INSIDE = 2, /* covered by a segment that starts in an earlier unit */
  TES_UNIT_HOST = 3,  /* a host of packed large blocks (large.c) */
};
/* The map's value for p's 4 MiB unit (TES_UNIT_*). */
TES_INLINE unsigned tes_segmap_get(const void *p) {
  uintptr_t unit = (uintptr_t)p >> TES_SEGMENT_SHIFT;
  if (tes_unlikely(unit >= TES_SEGMAP_COUNT)) return 0;
  /* Atomic (a plain load on x86): other threads update the byte's other units. */
  return (__atomic_load_n(&tes_segmap[unit >> 2], __ATOMIC_RELAXED) >> ((unit & 3) * 2)) & 3;
}

/* A link read from a block another thread may be reusing (walks of bins and
 * delayed lists by statistics and tes_heap_visit): follow it only if it is
 * 16-byte aligned and inside a small/medium segment's first 4 MiB unit,
 * which stays mapped while the walker holds the segment lock or owns the
 * heap; an aligned read there stays inside one page. The unit of a large
 * block's segment is mapped only as far as the block needs (large.c), so a
 * large segment does not qualify (its header, in its first page, says so). */
TES_INLINE bool tes_maybe_small_block(const void *p) {
  return ((uintptr_t)p & 15) == 0 && tes_segmap_get(p) == TES_UNIT_START &&
         ((const tes_segment_t *)((uintptr_t)p & ~(uintptr_t)TES_SEGMENT_MASK))->kind != TES_SEG_LARGE;
}
#define TES_DELAYED_WALK_MAX ((size_t)1 << 20) /* delayed-list links such a walk follows at most */
/* Packed large blocks (large.c): a unit that is TES_UNIT_HOST in the segment map hosts
 * several, each in a run of 64 KiB granules with a segment header of its
 * own at the run's start; the host keeps at TES_LARGE_OFFSET a word with
 * bit g set where a run starts. The segment of the block p lies in, or
 * NULL. */
#define TES_PACK_GRANULE_SHIFT 16
#define TES_PACK_ALL (~(uint64_t)1) /* the granules blocks may take: all but granule 0, the host's header */
/* The host's table (large.c owns it, under its large_lock but for
 * `starts`), at TES_LARGE_OFFSET in the host's first OS page; declared
 * here so that white-box tests check its invariants (unit_pack_invariants).
 * Bit g of each mask is granule g. */
typedef struct tes_pack_host_s {
  /* Bit g: a published block's run starts at granule g. The block holding
   * granule g starts at the highest such bit at or below g (the granules
   * between are its own; tes_packed_segment_of). One atomic OR or AND a
   * block, not a store a granule. */
  _Atomic uint64_t starts;
  struct tes_pack_host_s *next, *prev; /* large.c's host list */
  uint64_t free_mask;   /* granules no block holds */
  uint64_t dirty_mask;  /* free granules that may hold data (resident, or not zero) */
  uint64_t purged_mask; /* free granules purged, counted in the host's purged_bytes */
  uint64_t aging_mask;  /* free dirty granules that stayed free since `due` was set */
  int64_t due;          /* when the aging granules are purged (0: none) */
  int64_t empty_since;  /* when its last block went (if free_mask is TES_PACK_ALL) */
  /* Where granule 0's old data ends (at most a granule): no block takes
   * granule 0, so nothing purges or rewrites what the segment held there
   * before it became a host, beyond the first OS page the table clears. */
  size_t head_dirty_end;
} tes_pack_host_t;
static inline tes_pack_host_t *tes_pack_host_table(tes_segment_t *host) {
  return (tes_pack_host_t *)((uint8_t *)host + TES_LARGE_OFFSET);
}
TES_INLINE tes_segment_t *tes_packed_segment_of(const void *p) {
  uintptr_t host = (uintptr_t)p & ~(uintptr_t)TES_SEGMENT_MASK;
  unsigned g = (unsigned)(((uintptr_t)p & TES_SEGMENT_MASK) >> TES_PACK_GRANULE_SHIFT);
  uint64_t below = __atomic_load_n((const uint64_t *)(host + TES_LARGE_OFFSET), __ATOMIC_ACQUIRE) << (63 - g);
  if (below == 0) return NULL;
  tes_segment_t *seg = (tes_segment_t *)(host + ((uintptr_t)(g - (unsigned)__builtin_clzll(below)) << TES_PACK_GRANULE_SHIFT));
  return (uintptr_t)p < (uintptr_t)seg + seg->size ? seg : NULL;
}
TES_INLINE tes_page_t *tes_page_of(tes_segment_t *seg, const void *p) {
  return &seg->pages[((uintptr_t)p & TES_SEGMENT_MASK) >> seg->page_shift];
}
static inline size_t tes_page_size_of(const tes_segment_t *seg) {
  return seg->kind == TES_SEG_LARGE ? seg->size : ((size_t)1 << seg->page_shift);
}
static inline uint32_t tes_page_live(const tes_page_t *page) {
  return page->in_full ? page->reserved : page->used - page->pinned;
}

/* Free-list link encoding: identity in the default build. In the secure
 * build a link is stored as rotl(next ^ keys[1], 17) + keys[0] with the
 * page's two random keys (mimalloc's mi_ptr_encode scheme): an overflow or a
 * use-after-free write cannot forge a link without both keys, and the list
 * terminator (NULL) does not reveal a key. Three instructions each way. */
#define TES_LINK_ROTATE 17
TES_INLINE uintptr_t tes_keyed_decode(const uintptr_t keys[2], uintptr_t stored) {
#if TES_SECURE
  uintptr_t x = stored - keys[0];
  return ((x >> TES_LINK_ROTATE) | (x << (64 - TES_LINK_ROTATE))) ^ keys[1];
#else
  (void)keys;
  return stored;
#endif
}
TES_INLINE uintptr_t tes_keyed_encode(const uintptr_t keys[2], uintptr_t next) {
#if TES_SECURE
  uintptr_t x = next ^ keys[1];
  return ((x << TES_LINK_ROTATE) | (x >> (64 - TES_LINK_ROTATE))) + keys[0];
#else
  (void)keys;
  return next;
#endif
}
/* keys: a page's, a heap's (both builds have the fields; only the
 * hardened build reads them). */
TES_INLINE uintptr_t tes_link_decode(const tes_page_t *page, uintptr_t stored) {
  return tes_keyed_decode(page->keys, stored);
}
TES_INLINE uintptr_t tes_link_encode(const tes_page_t *page, uintptr_t next) {
  return tes_keyed_encode(page->keys, next);
}
/* A heap's delayed list (remote frees into its full pages, free.c) mixes
 * pages, so its links cannot use a page's keys: in the hardened build they
 * are encoded the same way with the owner heap's two keys, set once when
 * the heap is set up (the list is empty then) and never changed while it
 * lives. A write after free cannot forge one without both keys (before,
 * they were plain pointers, only checked: the address of another carved
 * block of the heap, a live one too, passed, and that block was freed on
 * the owner's behalf). Walkers of the list (stats.c) decode
 * with the same heap's keys. Identity in the default build. */
TES_INLINE tes_block_t *tes_delayed_decode(const tes_heap_t *heap, const tes_block_t *stored) {
  return (tes_block_t *)tes_keyed_decode(heap->keys, (uintptr_t)stored);
}
TES_INLINE tes_block_t *tes_delayed_encode(const tes_heap_t *heap, const tes_block_t *next) {
  return (tes_block_t *)tes_keyed_encode(heap->keys, (uintptr_t)next);
}
/* Where a free block's link is (page lists, the remote stack; the heap's
 * delayed list keeps its own link in the first word, both builds). The
 * default build: the block's first word. The hardened build: the same for
 * the small classes; for a medium block (block_size > TES_SMALL_BLOCK_MAX:
 * 10 KiB and up) the first word of its last 16 bytes, which a hardened
 * bin's check word uses too (alloc_inline.h, TES_SBIN_POP_OR_RETURN). The
 * canary after a medium request lies on the block's last OS page for most
 * requests of the class, so a fresh block never written touches one page
 * instead of two (fit-large: RELIABILITY.md, twenty-third session,
 * hlink23). They return the block whose `next` is the link (b itself, or
 * b + block_size - 16: a member access keeps GCC's type-based alias
 * analysis, which a store through a tes_block_t ** loses: the default
 * build's tes_page_collect reloaded page->free). tes_block_link_at takes the block size (walks of another
 * thread's page use their snapshot's); kind: TES_KIND_* (SMALL or MEDIUM
 * known at compile time take no compare). Every reader and writer of a
 * page list's link goes through these. */
TES_INLINE tes_block_t *tes_block_link_at(const tes_block_t *b, size_t block_size) {
#if TES_SECURE
  if (block_size > TES_SMALL_BLOCK_MAX) return (tes_block_t *)((uintptr_t)b + block_size - 16);
#else
  (void)block_size;
#endif
  return (tes_block_t *)b;
}
TES_INLINE tes_block_t *tes_block_link_slot_in(const tes_page_t *page, const tes_block_t *b, unsigned kind) {
#if TES_SECURE
  if (kind == TES_KIND_SMALL) return (tes_block_t *)b;
  if (kind == TES_KIND_MEDIUM) return (tes_block_t *)((uintptr_t)b + page->block_size - 16);
  return tes_block_link_at(b, page->block_size);
#else
  (void)page, (void)kind;
  return (tes_block_t *)b;
#endif
}
TES_INLINE tes_block_t *tes_block_link_slot(const tes_page_t *page, const tes_block_t *b) {
  return tes_block_link_slot_in(page, b, TES_KIND_ANY);
}
TES_INLINE tes_block_t *tes_block_next_in(const tes_page_t *page, const tes_block_t *b, unsigned kind) {
  return (tes_block_t *)tes_link_decode(page, (uintptr_t)tes_block_link_slot_in(page, b, kind)->next);
}
TES_INLINE tes_block_t *tes_block_next(const tes_page_t *page, const tes_block_t *b) {
  return tes_block_next_in(page, b, TES_KIND_ANY);
}
TES_INLINE void tes_block_set_next_in(const tes_page_t *page, tes_block_t *b, tes_block_t *next, unsigned kind) {
  tes_block_link_slot_in(page, b, kind)->next = (tes_block_t *)tes_link_encode(page, (uintptr_t)next);
}
TES_INLINE void tes_block_set_next(const tes_page_t *page, tes_block_t *b, tes_block_t *next) {
  tes_block_set_next_in(page, b, next, TES_KIND_ANY);
}
/* The link of free block b, about to be followed. In the hardened build, a
 * block written after its free (a use-after-free) decodes to a random
 * address: unless it stays in b's segment (or ends the list), the list ends
 * at b instead of the next malloc following it, and b is noted in the page
 * for tes_page_collect to report (the page's next malloc comes there at
 * once, its list being empty). No call here: a call on this path made the
 * fast path save registers on every malloc. */
TES_INLINE tes_block_t *tes_block_next_checked_in(tes_page_t *page, const tes_block_t *b, unsigned kind) {
  tes_block_t *next = tes_block_next_in(page, b, kind);
#if TES_SECURE
  /* A compare, not a shift (the shift destroys apart, which the cold branch
   * needs), and apart opaque there: else GCC tests the rotated link against
   * keys[1] instead, keeping it alive through the fast path (a register copy
   * on every malloc: 70.1 instructions a pair instead of 69.1). */
  uintptr_t apart = (uintptr_t)next ^ (uintptr_t)b;
  if (tes_unlikely(apart >= ((uintptr_t)1 << TES_SEGMENT_SHIFT))) {
    __asm__("" : "+r"(apart));
    if (apart != (uintptr_t)b) page->corrupt_link = b; /* next is not NULL */
    next = NULL;
  }
#endif
  return next;
}
TES_INLINE tes_block_t *tes_block_next_checked(tes_page_t *page, const tes_block_t *b) {
  return tes_block_next_checked_in(page, b, TES_KIND_ANY);
}

/* ---- init.c ---------------------------------------------------------------- */
void tes_process_init(void);                 /* idempotent; called from slow paths */
bool tes_process_ready(void);
void tes_reap_late_heaps(void);             /* abandon heaps of gone threads that no key destructor saw */
size_t tes_late_heap_count(void);           /* heaps waiting for that (tests) */
tes_heap_t *tes_thread_heap_init(void);          /* give the calling thread a heap; NULL on OOM */
tes_heap_t *tes_thread_heap_init_for_free(void); /* the same, for a thread's first call being a free */
uint64_t tes_random_next(void);              /* process-wide random (secure keys) */
extern uintptr_t tes_process_key;

/* ---- heap.c ---------------------------------------------------------------- */
tes_heap_t *tes_heap_alloc_struct(void);     /* from the heap pool; zeroed and listed */
void tes_heap_release_struct(tes_heap_t *heap);
void tes_heap_setup(tes_heap_t *heap, uintptr_t thread_id, tes_heap_t *thread_default);
void *tes_heap_malloc_generic(tes_heap_t *heap, size_t size, bool zero);  /* slow path */
#if TES_SECURE
/* The hardened malloc's fast path missed on `page` (the direct table's or
 * its class queue's head, NULL when the queue has none): that page
 * refilled from its owner's frees, else the generic path (heap.c); size
 * first, as malloc holds it (it stays in the first register for the tail
 * call). The page is the one the fast path popped from, passed on rather
 * than looked up again from the size (nineteenth session: 9 instructions
 * a miss). The default build calls
 * tes_heap_malloc_generic: the same refill there ran its threads row 4-5%
 * slower with bins on, where it never refills (docs/PERFORMANCE.md,
 * "Refills from local_free"). */
void *tes_heap_malloc_miss(size_t size, tes_heap_t *heap, tes_page_t *page);
#endif
void *tes_heap_malloc_aligned(tes_heap_t *heap, size_t size, size_t alignment, bool zero);
void tes_heap_collect(tes_heap_t *heap, bool force);
void tes_heap_collect_first_class(tes_heap_t *owner, bool force); /* tes_collect: the thread's first-class heaps */
bool tes_visit_defer_collect(bool force); /* tes_collect inside a tes_heap_visit walk: noted, run at its end */
void tes_heap_abandon(tes_heap_t *heap);     /* thread exit */
bool tes_heap_park(tes_heap_t *heap);        /* thread exit: kept whole for the next new thread */
tes_heap_t *tes_heap_unpark(uintptr_t thread_id); /* thread start: a parked heap, or NULL */
void tes_heap_abandon_parked(int64_t before, unsigned max); /* up to max parked before `before` abandoned */
extern tes_lock_t tes_abandon_lock;           /* held by every abandon and by tes_stats_get's walks */
void tes_abandon_lock_take(void);             /* stats.c */
void tes_abandon_lock_give(void);
void tes_heap_move_pages(tes_heap_t *from, tes_heap_t *to); /* tes_heap_delete */
void tes_heap_process_deletes(tes_heap_t *heap); /* the owner moves in the heaps other threads deleted */
void tes_heap_free_all(tes_heap_t *heap);    /* tes_heap_destroy */
void tes_heap_queue_remove(tes_heap_t *heap, tes_page_t *page);
void tes_heap_page_retire(tes_heap_t *heap, tes_page_t *page);
void tes_heap_page_emptied(tes_heap_t *heap, tes_page_t *page); /* retire, or keep (hardened) */
void tes_heap_page_unfull(tes_heap_t *heap, tes_page_t *page);
void tes_heap_process_delayed(tes_heap_t *heap);
void tes_heap_purge_due(tes_heap_t *heap);   /* purge this heap's retired pages that are due */
void tes_heap_adopt_segment(tes_heap_t *heap, tes_segment_t *seg);
void tes_heap_fold_page(tes_heap_t *heap, tes_page_t *page, bool reset);
void tes_heaps_lock(void);
void tes_heaps_unlock(void);
extern tes_heap_t *tes_heaps_all;            /* under tes_heaps_lock */
void tes_heaps_lock_reset(void);
void tes_heaps_purge_locks_acquire(void); /* fork: every heap's purge lock (heaps lock held) */
void tes_heaps_after_fork_child(void);  /* fork child: no page waits for a freer that is gone */
void tes_heaps_purge_locks_release(bool child);

/* ---- page.c ---------------------------------------------------------------- */
void tes_page_init(tes_page_t *page, tes_segment_t *seg, unsigned class_index, size_t block_size);
bool tes_page_extend(tes_page_t *page);       /* carve more blocks onto `free` */
size_t tes_page_collect(tes_page_t *page);    /* local_free + xthread_free -> free; returns remote count */
#if TES_SECURE
/* A page's local_free (or its remote stack) is about to become its free
 * list. Both are last in, first out: the head is the page's block freed
 * last, which the next malloc of the class would hand back, the easiest
 * use-after-free to exploit (a program that freed two blocks and
 * allocated their size again got the second back whenever that page's
 * free list had run dry: security.freed_last_not_next, at f40c613). So
 * the head `last` stays behind, linked in front of `keep`, and the rest
 * of the list is returned to become free: the block freed last is handed
 * out at the next refill. NULL, nothing changed, when the list is that
 * block alone (or is cut right after it: a link found overwritten,
 * tes_block_next_checked). Slow paths only: a decode and an encode a
 * refill. */
TES_INLINE tes_block_t *tes_secure_hold_back_in(tes_page_t *page, tes_block_t *last, tes_block_t *keep, unsigned kind) {
  tes_block_t *rest = tes_block_next_checked_in(page, last, kind);
  if (rest != NULL) tes_block_set_next_in(page, last, keep, kind);
  return rest;
}
TES_INLINE tes_block_t *tes_secure_hold_back(tes_page_t *page, tes_block_t *last, tes_block_t *keep) {
  return tes_secure_hold_back_in(page, last, keep, TES_KIND_ANY);
}
#endif

/* The end of every collect: when free is empty, local_free (every carved
 * block that is neither live nor remote) becomes free. Hardened: all but
 * its head, the block freed last, which stays (tes_secure_hold_back); a
 * list of that block alone moves whole. (Leaving it while the page had
 * blocks left to carve, so that malloc carved fresh ones, was tried:
 * bench_realloc, one live block a class, carved its pages whole, 2.8 ->
 * 3.7 MB peak RSS, and handed the block back anyway once they were.) */
/* head: the caller knows the page is a class's head, so in no full queue
 * (its live blocks used - pinned, without tes_page_live's in_full test). */
TES_INLINE uint32_t tes_page_live_in(const tes_page_t *page, bool head) {
  return head ? page->used - page->pinned : tes_page_live(page);
}

/* kind: TES_KIND_* of the page (its links' place, hardened build). */
TES_INLINE void tes_page_free_from_local_kind(tes_page_t *page, bool head, unsigned kind) {
  if (page->free == NULL && page->local_free != NULL) {
#if TES_SECURE
    tes_block_t *rest = tes_secure_hold_back_in(page, page->local_free, NULL, kind);
    if (rest != NULL) {
      page->installed += page->capacity - tes_page_live_in(page, head) - 1;
      page->free = rest; /* local_free keeps the block freed last, alone */
      page->free_is_zero = 0;
      return;
    }
#endif
    page->installed += page->capacity - tes_page_live_in(page, head);
    page->free = page->local_free;
    page->local_free = NULL;
    page->free_is_zero = 0;
  }
#if !TES_SECURE
  (void)kind;
#endif
}
TES_INLINE void tes_page_free_from_local_in(tes_page_t *page, bool head) {
  tes_page_free_from_local_kind(page, head, TES_KIND_ANY);
}

TES_INLINE void tes_page_free_from_local(tes_page_t *page) { tes_page_free_from_local_in(page, false); }

/* tes_page_collect for the malloc slow path: the call only for a remote
 * stack to take (or, hardened, a cut link to report); the owner's own
 * frees are moved inline. The head page the slow path moves to the full
 * queue has nothing to collect, and the one it serves from usually has its
 * owner's frees only: the call cost 19 (default) or 39 (hardened)
 * instructions either way. */
TES_INLINE void tes_page_collect_quick(tes_page_t *page) {
#if TES_SECURE
  if (tes_unlikely(page->corrupt_link != NULL)) {
    tes_page_collect(page);
    return;
  }
#endif
  if (tes_tf_list(atomic_load_explicit(&page->xthread_free, memory_order_relaxed)) != NULL) tes_page_collect(page);
  else tes_page_free_from_local(page);
}
size_t tes_page_free_count(const tes_page_t *page); /* length of `free` (owner only) */
/* Owner only: true when the page is empty, its remote stack taken (the
 * caller retires it); false, and nothing taken, when the stack cannot
 * empty it (its blocks wait for find_page, as any queued page's do). */
bool tes_page_take_if_empty(tes_page_t *page);
bool tes_page_contains_free(const tes_page_t *page, const tes_block_t *b);
void tes_page_set_delayed(tes_page_t *page, uintptr_t state);
void tes_page_wait_unfreeing(const tes_page_t *page);
/* The owner, before a page's descriptor is given back (retired to its
 * segment, which may be released with it; or set up afresh): a remote
 * freer whose block brought the page's last free back through the delayed
 * list may not have made its last store yet, the page's word from FREEING
 * to NORMAL (free.c, delayed_push). Waits for it (ARCHITECTURE.md, "Frees
 * from other threads"). One load of the word, acquire (a plain load on
 * x86), at each retire. */
static inline void tes_page_settle_freeing(const tes_page_t *page) {
  if (tes_unlikely((atomic_load_explicit(&page->xthread_free, memory_order_acquire) & TES_TF_MASK) == TES_TF_FREEING))
    tes_page_wait_unfreeing(page);
}

/* ---- segment.c ------------------------------------------------------------- */
tes_segment_t *tes_segment_alloc(tes_heap_t *heap, tes_segment_kind_t kind);
void tes_segment_free(tes_segment_t *seg);    /* all pages free; to cache or OS */
tes_page_t *tes_segment_page_alloc(tes_heap_t *heap, tes_segment_kind_t kind); /* fresh page */
void tes_segment_page_free(tes_heap_t *heap, tes_page_t *page);  /* retired page back */
/* page's bin is now heap's bin: set, and copied into the slice table (the
 * page's slices were entered with the bin it had then). */
void tes_segment_page_bin(tes_heap_t *heap, tes_page_t *page, tes_bin_t *bin);
void tes_segment_purge_pages(tes_page_t *first, unsigned count); /* neighbours in one segment */
void tes_segment_purge_kept(tes_page_t *page); /* a kept page still in use, its lists emptied (heap.c); purge_lock held */
tes_segment_t *tes_segment_find(const void *p); /* owner of any address, or NULL */
/* Error path only: does p lie in one of the last 64 small/medium segments
 * released (whose blocks were all free then)? Takes the segments lock. */
bool tes_segment_released_before(const void *p);
void tes_segmap_set(tes_segment_t *seg, bool present);
void tes_segmap_shrink(tes_segment_t *seg, size_t new_size); /* before seg->size becomes new_size */
void tes_segmap_set_host(tes_segment_t *host); /* a unit of packed large blocks (large.c) */
tes_segment_t *tes_cache_take(size_t min_size, size_t max_size, size_t alignment);
tes_segment_t *tes_segment_obtain(size_t size, size_t alignment); /* cache or OS; segmap not set */
void tes_cache_put(tes_segment_t *seg);
void tes_cache_purge(bool force);
size_t tes_cache_count(void); /* segments in the cache (tests) */
void tes_abandoned_push(tes_segment_t *seg);
tes_segment_t *tes_abandoned_pop(void);
size_t tes_abandoned_count(void);
void tes_segment_locks_acquire(void);
void tes_segment_locks_release(bool child);
void tes_segment_link(tes_heap_t *heap, tes_segment_t *seg);   /* heap's lists */
void tes_segment_unlink(tes_heap_t *heap, tes_segment_t *seg);
void tes_heap_purge_cancel(tes_heap_t *heap, tes_page_t *page);
/* purge.c: the purge delay in effect at `now` (ms; TESSERA_PURGE_DELAY_MS,
 * raised while purged memory is retaken soon after its purge), and the
 * report of such a retake (purged_at: ms clock of the purge, 0 if forced). */
int64_t tes_purge_delay(int64_t now);
void tes_purge_note_retake(int64_t purged_at, size_t bytes);
void tes_purge_note_growth(int64_t now, size_t bytes); /* a growth purge gave back bytes */
bool tes_purge_growth_held(int64_t now); /* a growth purge's page was retaken soon: hold that purge off */
void tes_purge_note_retake_at(int64_t purged_at, int64_t now); /* the same at a given clock (tests) */
/* purge.c: the purge thread (TESSERA_PURGE_THREAD): started at load
 * (init.c, tes_constructor), or from a malloc slow path holding no lock when
 * the option is turned on later; a fork child forgets its parent's. heap.c:
 * a round over every heap, purging what is due (or everything) or only
 * looking (both return the next expiry, INT64_MAX: none); segment.c: when
 * the segment cache's next purge is due. */
void tes_purge_thread_start(void);
void tes_purge_thread_after_fork(void);
void tes_purge_thread_notify(void); /* a purge was scheduled: wake a parked purge thread */
int64_t tes_heaps_purge(int64_t now, bool force);
int64_t tes_heaps_purge_next(void);
int64_t tes_cache_purge_due(void);
void tes_heap_purge_schedule(tes_heap_t *heap, tes_page_t *page);
void tes_heap_purge_schedule_pages(tes_heap_t *heap, tes_segment_t *seg, uint64_t mask); /* bit i: seg->pages[i] */
void tes_heap_purge_for_growth(tes_heap_t *heap, size_t bytes, bool carved_only); /* purge_lock held */
void tes_abandoned_lock(void);
void tes_abandoned_unlock(void);
extern tes_segment_t *tes_abandoned_list;     /* under tes_abandoned_lock */
void tes_segments_lock(void);
void tes_segments_unlock(bool child);
extern tes_segment_t *tes_segments_all;       /* under tes_segments_lock */

/* ---- large.c --------------------------------------------------------------- */
void *tes_large_alloc(tes_heap_t *heap, size_t size, size_t alignment, bool zero);
void tes_large_free(tes_segment_t *seg);
/* Purge the dirty tails of live large blocks that are due (all when force);
 * tes_large_tail_due: the earliest pending one (INT64_MAX: none). */
void tes_large_purge_tails(bool force);
int64_t tes_large_tail_due(void);
/* The oldest empty host of packed large blocks goes to the segment cache
 * (tes_segment_obtain, before it maps a unit); false: none. */
bool tes_large_spare_to_cache(void);
void *tes_large_realloc(tes_segment_t *seg, void *p, size_t size);   /* NULL: caller copies */
#if TES_SECURE
void *tes_large_alloc_growable(tes_heap_t *heap, size_t size);       /* room to grow, for realloc */
void tes_large_discard(tes_segment_t *seg, void *p, size_t requested); /* its contents are no longer needed */
#endif
size_t tes_large_usable(const tes_segment_t *seg);
bool tes_large_owned_block(const tes_segment_t *seg, const void *p);
/* Error path only: was p one of the last 256 large blocks freed (true, with
 * its usable size then)? Takes large_lock. */
bool tes_large_freed_before(const void *p, size_t *size);
void tes_large_lock(void);
void tes_large_unlock(bool child);
void tes_large_reassign(tes_heap_t *from, tes_heap_t *to, bool release); /* release: free them */
extern _Atomic int64_t tes_large_in_use, tes_large_in_use_peak;
extern _Atomic int64_t tes_large_blocks, tes_large_blocks_peak; /* live large blocks, for glibc_compat.c */
extern tes_segment_t *tes_large_list;           /* under tes_large_lock */

/* ---- free.c ---------------------------------------------------------------- */
void tes_free_slow(void *p);                    /* unowned, tail unit, large, remote */
void tes_free_remote(tes_page_t *page, tes_block_t *block);
void tes_page_free_event(tes_page_t *page);     /* used reached 0 on the owner's free */
void tes_free_local_block(tes_page_t *page, tes_block_t *block); /* owner, outside the fast path */
/* The owner's free into the page itself: push onto local_free; an empty or
 * full page calls out (`used` 0: see tes_page_free_event). */
TES_INLINE void tes_page_push_local_in(tes_page_t *page, tes_block_t *block, unsigned kind) {
  tes_block_set_next_in(page, block, page->local_free, kind);
  page->local_free = block;
  if (tes_unlikely(--page->used == 0)) tes_page_free_event(page);
}
TES_INLINE void tes_page_push_local(tes_page_t *page, tes_block_t *block) {
  tes_page_push_local_in(page, block, TES_KIND_ANY);
}
tes_segment_t *tes_owned_segment(const void *p, bool report); /* validate for free/usable */

/* ---- errors (free.c) ----------------------------------------------------- */
/* TES_ERR_BIN_DAMAGED: a bin's block lost its mark (tes_bin_refuse): freed
 * twice with frees between, or written after it was freed. */
typedef enum {
  TES_ERR_INVALID_FREE,
  TES_ERR_DOUBLE_FREE,
  TES_ERR_OVERFLOW,
  TES_ERR_CORRUPT,
  TES_ERR_BIN_DAMAGED
} tes_error_kind_t;
void tes_report_error(tes_error_kind_t kind, const void *p, const tes_page_t *page);
void tes_report_unowned(const void *p); /* no live block at p: double free of a large block, or invalid */
/* The default build's free found p at the head of its list: reported (and,
 * by default, abort); with TESSERA_ABORT_ON_ERROR=0 the second free is
 * ignored. Out of line, off the fast path. */
void tes_report_double_free(const tes_page_t *page, const void *p) __attribute__((cold, noinline));
void tes_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- options.c / stats.c --------------------------------------------------- */
void tes_options_init(void);
bool tes_options_parse_long(const char *text, long *out); /* the TESSERA_* integer syntax */
#define TES_REPORT_SCRATCH_BYTES 16384
extern tes_lock_t tes_report_scratch_lock;
void *tes_report_scratch_take(size_t size); /* size <= TES_REPORT_SCRATCH_BYTES (checked at compile time by the callers); zeroed; locked until given back */
void tes_report_scratch_give(void);
typedef struct tes_text_s {
  char *buffer;
  size_t capacity, length;
} tes_text_t;
void tes_text_add(tes_text_t *text, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tes_text_write(const tes_text_t *text, FILE *out);
void tes_stats_fold_heap(tes_heap_t *heap);   /* a heap leaves: keep its counters */
void tes_stats_thread_started(void);
void tes_stats_thread_exited(void);
void tes_stats_heap_abandoned(void);
void tes_stats_heap_reclaimed(void);
void tes_stats_print_at_exit(void);
extern tes_counters_t tes_orphan_counters;    /* frees by threads without a heap */
extern tes_lock_t tes_stats_lock;

/* ---- secure.c ---------------------------------------------------------------- */
#if TES_SECURE
/* The hardened block layout of small blocks (classes up to
 * TES_SMALL_BLOCK_MAX, in small pages):
 *   [requested bytes][canary: 4 bytes][slack][requested size: 4 bytes]
 * and of medium blocks (larger classes, in medium segments):
 *   [requested bytes][canary: 4 bytes][slack]
 * with the requested size in a slot of the segment header
 * (tes_secure_size_word), not in the block.
 * The canary starts right after the last requested byte (unaligned), so an
 * overflow of even one byte changes it; the requested size (below 2^32:
 * medium blocks end at TES_MEDIUM_BLOCK_MAX) sits in a 32-bit word that
 * free finds from the pointer and the page's block size alone: a small
 * block's last word, or a medium block's slot. A medium block (8-128 KiB)
 * that the program never writes to its end then costs no page fault for
 * its last OS page: the size word there faulted one in for every such
 * block (fit-large: peak RSS 2.3x the default build's; RELIABILITY.md,
 * seventeenth session). Eight bytes of padding, as mimalloc's (a 32-bit
 * canary and a 32-bit size): a request
 * moves to the next size class only when fewer than 8 bytes of its class
 * are left over, not always (16 bytes of padding pushed every request of a
 * 16-byte-spaced class up one class). Large blocks, whose slack can exceed
 * 32 bits, keep [requested][canary: 8 bytes][slack] (TES_LARGE_PADDING)
 * with the 64-bit requested size in their segment's header
 * (large_requested), not at the block's end: an aligned large block's
 * slack runs up to the alignment (1 MiB), and a size word at its end
 * faulted in one more OS page of every such block (RELIABILITY.md,
 * twenty-second session, hcanary22). */
#define TES_PADDING TES_SECURE_PADDING
#define TES_LARGE_PADDING 8
/* The canary is the page's keys[1], whose bytes all have their top bit set
 * (tes_secure_page_init): the usual off-by-one writes (a NUL, an ASCII
 * character) can never leave it intact by chance. Small and medium blocks
 * use its low 32 bits. */
#define TES_CANARY_BITS ((uintptr_t)0x8080808080808080ull)

/* Per class, c = ceil(2^64 / block size): for an offset n < 2^32 one
 * 64x64->128-bit multiply n * c gives in its high half n / block size and
 * in its low half a value below c exactly when n is a multiple of it
 * (Lemire, Kaser & Kurz, "Faster remainder by direct computation", 2019). */
extern const uint64_t tes_secure_divisors[TES_CLASS_COUNT];

/* Is p a block start of its small/medium page, and which block? Callers
 * guarantee area <= p < area + page size (the slice table, or
 * tes_owned_segment): the offset is below 2^19. One multiply. */
TES_INLINE bool tes_secure_block_index(const tes_page_t *page, const void *p, size_t *index) {
#if defined(__x86_64__)
  /* The divisor a memory operand of both the multiply and the compare: in
   * C, GCC loads it into a register of its own first (an instruction more
   * on every hardened free). */
  uint64_t low = (uintptr_t)p - (uintptr_t)page->area, high;
  __asm__("mulq %2" : "+a"(low), "=d"(high) : "m"(page->divisor) : "cc");
  *index = (size_t)high;
  return low < page->divisor;
#else
  uint64_t c = page->divisor;
  unsigned __int128 product = (unsigned __int128)((uintptr_t)p - (uintptr_t)page->area) * c;
  *index = (size_t)(product >> 64);
  return (uint64_t)product < c;
#endif
}

/* What free writes into a block's size word, small/medium (32 bits) or
 * large (64): no size is that large, so a second free of the block fails
 * the size check of tes_secure_free_quick and tes_secure_free_verdict
 * names it a double free; malloc overwrites it. */
#define TES_FREED_TAG32 UINT32_MAX
#define TES_FREED_TAG SIZE_MAX
/* What every other free of a small/medium block writes there: a free from
 * another thread (the exchange of tes_secure_free_quick_any_thread, or
 * tes_secure_free_verdict's). The owner's inline free writes
 * TES_FREED_TAG32 with a plain store after a plain read, so its free and
 * another thread's at the same moment can both pass; the block is then on
 * the remote stack (or the delayed list) and on the page's local list. The
 * owner takes a remote-freed block only with this tag in its size word
 * (page.c, heap.c: tes_secure_remote_block_ok): anything else there (the
 * owner's tag, or a size: handed out again from the local list) is that
 * double free, reported, and the block is left where the owner's free put
 * it (eighteenth session). Both tags fail every size test. */
#define TES_FREED_TAG32_REMOTE (UINT32_MAX - 1)
/* heap.c: a block in a hardened bin lost its freed tag or its first word
 * (written after free): reported, dropped (its page keeps counting it),
 * and the malloc of `size` served by the slow path. */
void *tes_sbin_damaged(struct tes_heap_s *heap, tes_page_t *page, tes_block_t *block, size_t size);

/* Medium blocks' size words: one 32-bit slot per 8 KiB of the segment
 * (a medium block is larger than that, so no two block starts share a
 * slot), in the medium segment's header after its 8 page descriptors,
 * within its first OS page (which the descriptors touch anyway). Slots of
 * a segment that was something else before hold leftovers, as a fresh
 * block's last word did: malloc writes a block's slot before handing it
 * out, and a free of a block never handed out fails the canary (or finds
 * the tag) and goes to the verdict. */
#define TES_SIZE_SLOT_SHIFT 13
#define TES_SIZE_SLOTS (TES_SEGMENT_SIZE >> TES_SIZE_SLOT_SHIFT)
#define TES_SIZE_SLOTS_OFFSET \
  ((offsetof(tes_segment_t, pages) + TES_MEDIUM_PAGES * sizeof(tes_page_t) + 63) & ~(size_t)63)
static_assert(((size_t)1 << TES_SIZE_SLOT_SHIFT) == TES_SMALL_BLOCK_MAX, "every medium block spans a slot's bytes");
static_assert(TES_SIZE_SLOTS_OFFSET + TES_SIZE_SLOTS * sizeof(uint32_t) <= 4096,
              "the size slots share the medium segment header's first OS page");
static_assert(TES_SIZE_SLOTS_OFFSET + TES_SIZE_SLOTS * sizeof(uint32_t) <=
                  offsetof(tes_segment_t, pages) + TES_SMALL_PAGES * sizeof(tes_page_t),
              "before the header guard (placed after a small segment's header)");

/* The remote-free bitmaps (hrem25): a bit a block, set by the block's
 * remote free (free.c), taken by the owner's collect (page.c). In page 0 of
 * every small and medium segment, which holds no blocks: from 32 KiB on,
 * after the header and its guard page (tes_secure_header_guard), 512 bytes
 * for each 64 KiB of page area (a small page's 4,096 16-byte blocks; a
 * medium page, at most 63 blocks, gets 4 KiB of which it uses a word).
 * Untouched (never committed) until a page gets a remote free, or its
 * descriptor's set-up reads it (tes_page_init: a read of a page never
 * written maps the zero page, no memory). */
#define TES_REMOTE_BITS_OFFSET ((size_t)32 << 10)
static_assert(offsetof(tes_segment_t, pages) + TES_SMALL_PAGES * sizeof(tes_page_t) <= TES_REMOTE_BITS_OFFSET,
              "the bitmaps follow the largest header");
static_assert(TES_REMOTE_BITS_OFFSET + (TES_SEGMENT_SIZE >> 7) <= ((size_t)1 << TES_SMALL_PAGE_SHIFT),
              "the bitmaps end within page 0 of a small segment");
static_assert((((size_t)1 << TES_SMALL_PAGE_SHIFT) >> 7) * 8 >= ((size_t)1 << TES_SMALL_PAGE_SHIFT) / 16,
              "512 bytes hold a small page's blocks");
TES_INLINE _Atomic uint64_t *tes_remote_bits_at(uintptr_t area) {
  return (_Atomic uint64_t *)((area & ~(uintptr_t)TES_SEGMENT_MASK) + TES_REMOTE_BITS_OFFSET +
                              ((area & TES_SEGMENT_MASK) >> 7));
}
TES_INLINE _Atomic uint64_t *tes_page_remote_bits(const tes_page_t *page) {
  return tes_remote_bits_at((uintptr_t)page->area);
}
/* Remote frees set in the bitmap of a page of `capacity` carved blocks and
 * not yet taken by its owner (a popcount of every word: relaxed reads). */
TES_INLINE size_t tes_page_remote_pending(const tes_page_t *page, size_t capacity) {
  const _Atomic uint64_t *bits = tes_page_remote_bits(page);
  size_t pending = 0;
  for (size_t w = 0, words = (capacity + 63) / 64; w < words; w++)
    pending += (size_t)__builtin_popcountll(atomic_load_explicit(&bits[w], memory_order_relaxed));
  return pending;
}

/* The 32-bit word that records a small or medium block's requested size
 * (or the freed tag): the block's last word, or a medium block's slot.
 * kind: TES_KIND_* (a bool: small or not known). */
TES_INLINE uint32_t *tes_secure_size_word_in(const tes_page_t *page, const void *p, unsigned kind) {
  uintptr_t at = (uintptr_t)p;
  if (kind == TES_KIND_MEDIUM || (kind == TES_KIND_ANY && page->block_size > TES_SMALL_BLOCK_MAX))
    return (uint32_t *)((at & ~(uintptr_t)(TES_SEGMENT_SIZE - 1)) + TES_SIZE_SLOTS_OFFSET) +
           ((at >> TES_SIZE_SLOT_SHIFT) & (TES_SIZE_SLOTS - 1));
  return (uint32_t *)(at + page->block_size - sizeof(uint32_t));
}
TES_INLINE uint32_t *tes_secure_size_word(const tes_page_t *page, const void *p) {
  return tes_secure_size_word_in(page, p, false);
}
static_assert(TES_DIRECT_MAX <= TES_SMALL_BLOCK_MAX, "the direct table's pages are small pages");

/* A small/medium block was just handed out for `requested` bytes
 * (requested <= block_size - TES_PADDING): write the canary and the size
 * (4 instructions, and the compare that finds a medium block's slot unless
 * small says it is a small page's block, as the direct table's are). */
TES_INLINE void tes_secure_arm(const tes_page_t *page, void *p, size_t requested, unsigned small) {
  uint32_t canary = (uint32_t)page->keys[1];
  uint32_t size32 = (uint32_t)requested;
  memcpy((uint8_t *)p + requested, &canary, sizeof canary);
  memcpy(tes_secure_size_word_in(page, p, small), &size32, sizeof size32); /* small: a TES_KIND_* */
}

/* Every check of a free into a small/medium page that is ours (slice table
 * or segment map) at once, no report: true when p is a carved block start
 * of a page in use (a retired page has capacity 0), it was not freed already
 * (its size word is not TES_FREED_TAG32) and its canary is intact; the
 * size word then gets the tag. Nothing at p is read before p is known to
 * be a block start. About 20 instructions, on the page's first cache line
 * and the block's size word; anything else goes to tes_secure_free_verdict,
 * which finds out what is wrong and reports it. */
/* p is a carved block's start and its size word records a requested size
 * (not the freed tag, not overwritten): *requested. Small/medium pages. */
TES_INLINE bool tes_secure_recorded_size(const tes_page_t *page, const void *p, unsigned kind, uint32_t *requested) {
  size_t index;
  /* The index of an offset below 2^32 is below 2^32: compared in 32 bits,
   * capacity is a memory operand (no load into a register of its own). */
  if (!tes_secure_block_index(page, p, &index) || (uint32_t)index >= page->capacity) return false;
  memcpy(requested, tes_secure_size_word_in(page, p, kind), sizeof *requested);
  /* A sum (no overflow: a 32-bit size in 64 bits) rather than block_size -
   * TES_PADDING: malloc_usable_size's path is one instruction shorter. */
  return (size_t)*requested + TES_PADDING <= page->block_size;
}

/* The canary right after a small/medium block's recorded size is intact. */
TES_INLINE bool tes_secure_canary_ok(const tes_page_t *page, const void *p, uint32_t requested) {
  uint32_t canary;
  memcpy(&canary, (const uint8_t *)p + requested, sizeof canary);
  return canary == (uint32_t)page->keys[1];
}

/* tes_secure_free_quick for a page of a kind known or not (kind:
 * TES_KIND_*, a constant). */
TES_INLINE bool tes_secure_free_quick_in(const tes_page_t *page, void *p, unsigned kind) {
  size_t index;
  if (!tes_secure_block_index(page, p, &index) || (uint32_t)index >= page->capacity) return false;
  uint32_t *size_word = tes_secure_size_word_in(page, p, kind), requested;
  memcpy(&requested, size_word, sizeof requested);
  /* not freed already, not overwritten: a size */
  if ((size_t)requested + TES_PADDING > page->block_size) return false;
  if (!tes_secure_canary_ok(page, p, requested)) return false;
  /* A plain write of the tag, after a plain read of the size: the owner's
   * free and another thread's free of the block at the same moment can
   * both pass. An atomic exchange here (a locked instruction, no more
   * instructions) made the hardened malloc+free pair 1.6-1.8x as slow
   * (RELIABILITY.md, fourteenth session). */
  uint32_t tag = TES_FREED_TAG32;
  if (kind == TES_KIND_SMALL) {
    /* The same word, its address computed again from a block size GCC
     * cannot see is the same: else it keeps p + block size - 4 in a
     * register of its own for the read and this write (an lea on every
     * small free); this way both are address operands. */
    size_t block_size = page->block_size;
    __asm__("" : "+r"(block_size));
    size_word = (uint32_t *)((uintptr_t)p + block_size - sizeof(uint32_t));
  }
  memcpy(size_word, &tag, sizeof tag);
  return true;
}

/* For a page of either kind (the slow paths; the inline free knows the
 * kind from the slice tag: tes_slice_kind). */
TES_INLINE bool tes_secure_free_quick(const tes_page_t *page, void *p) {
  if (tes_unlikely(page->block_size > TES_SMALL_BLOCK_MAX)) return tes_secure_free_quick_in(page, p, TES_KIND_MEDIUM);
  return tes_secure_free_quick_in(page, p, TES_KIND_SMALL);
}

/* tes_secure_free_quick for a free from any thread (tes_secure_check_free:
 * already off the fast path, with a CAS of its own to come). The tag goes
 * in and the recorded size comes out in one atomic exchange, so that of two
 * such threads freeing the block at the same moment, the second finds the
 * tag and goes to tes_secure_free_verdict, which reports the double free.
 * Judged after the exchange: a size word that fails is put back as it was
 * (unless it was the tag) for the verdict to judge. The word is 4-byte
 * aligned (block starts and block sizes are multiples of 16). */
TES_INLINE bool tes_secure_free_quick_any_thread(const tes_page_t *page, void *p) {
  size_t index;
  if (!tes_secure_block_index(page, p, &index) || (uint32_t)index >= tes_page_capacity_any_thread(page)) return false;
  uint32_t *size_word = tes_secure_size_word(page, p);
  uint32_t requested = __atomic_exchange_n(size_word, TES_FREED_TAG32_REMOTE, __ATOMIC_RELAXED);
  if (tes_likely((size_t)requested + TES_PADDING <= page->block_size && tes_secure_canary_ok(page, p, requested)))
    return true;
  if (requested != TES_FREED_TAG32_REMOTE) __atomic_store_n(size_word, requested, __ATOMIC_RELAXED);
  return false;
}

/* The same checks, reporting what is wrong (secure.c): false when p must not
 * be freed (invalid or double free); an overflow is reported and the block
 * is still freed (true). Tags the block when it is to be freed. */
bool tes_secure_free_verdict(const tes_page_t *page, void *p);
/* A block taken from the page's remote stack or its heap's delayed list
 * (owner only): true when its size word holds TES_FREED_TAG32_REMOTE; else
 * the owner freed it too at the same moment (reported here, a double free):
 * the caller must not free it again. Inline: a call a block was 14 of the
 * walk's instructions. */
TES_INLINE bool tes_secure_remote_block_ok(const tes_page_t *page, const tes_block_t *b, bool small) {
  /* A plain read: the freer's exchange is ordered before by the acquire
   * that took the list, and the owner's own tag by program order. */
  uint32_t word;
  memcpy(&word, tes_secure_size_word_in(page, b, small), sizeof word);
  if (tes_likely(word == TES_FREED_TAG32_REMOTE)) return true;
  tes_report_double_free(page, b);
  return false;
}
/* Owner's free that failed tes_secure_free_quick: judge, then free. p
 * first, as free holds it: the fast path moves nothing for the tail call. */
void tes_secure_free_local(void *p, tes_page_t *page);

void tes_secure_set_padding(tes_page_t *page, void *p, size_t requested); /* large blocks, realloc in place */
bool tes_secure_check_padding(const tes_page_t *page, const void *p);     /* reports; false: freed already */
void tes_secure_rearm(void *p, size_t requested);                         /* a fresh block, armed for less */
size_t tes_secure_requested(const tes_page_t *page, const void *p);
bool tes_secure_check_free(tes_segment_t *seg, tes_page_t *page, void *p); /* slow path; false: do not free */
/* The segment header is one we wrote: its cookie is its address keyed with
 * the process key (segment.c and large.c set it when they map a segment). */
TES_INLINE bool tes_secure_cookie_ok(const tes_segment_t *seg) {
  return seg->cookie == ((uintptr_t)seg ^ tes_process_key);
}
void tes_secure_page_init(tes_page_t *page); /* random keys */
void tes_secure_shuffle(tes_page_t *page, tes_block_t **first, size_t count);
/* Guard pages of every segment (fixed places, set once when it is mapped):
 * one after the header (none with pages too large to fit one before the
 * first block page) and the last OS page of the segment. */
size_t tes_secure_header_guard(void);      /* offset of the header guard, 0 if none */
size_t tes_secure_first_free_offset(void); /* first byte past the header (and its guard) */
void tes_secure_guard_segment(void *seg, size_t size);
bool tes_secure_end_guard(void);           /* false with 64 KiB OS pages */
#else
#define TES_PADDING 0
#define TES_LARGE_PADDING 0
#endif

#endif
