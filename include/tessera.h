/* tessera.h — the public API of libtessera.
 *
 * libtessera is a drop-in malloc: link it or LD_PRELOAD build/libtessera.so
 * and every standard allocation call (malloc, free, calloc, realloc, ...,
 * C++ operator new/delete) goes to it. The tes_* functions below are the same
 * allocator under its own names, plus what the standard API cannot express:
 * statistics, options, explicit memory return and first-class heaps.
 *
 * Conventions: sizes are bytes; every pointer returned is at least 16-byte
 * aligned; failures return NULL with errno = ENOMEM (EINVAL for a bad
 * alignment) exactly like their standard counterparts. Every function is
 * thread-safe. */
#ifndef TESSERA_H
#define TESSERA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSERA_VERSION_MAJOR 0
#define TESSERA_VERSION_MINOR 1

/* ---- The standard allocation API under the tes_ prefix ------------------ */
void *tes_malloc(size_t size);
void *tes_calloc(size_t count, size_t size);
void *tes_realloc(void *ptr, size_t size);
void *tes_reallocarray(void *ptr, size_t count, size_t size);
void tes_free(void *ptr);
void tes_free_sized(void *ptr, size_t size);
void tes_free_aligned_sized(void *ptr, size_t alignment, size_t size);
void *tes_aligned_alloc(size_t alignment, size_t size);
int tes_posix_memalign(void **out, size_t alignment, size_t size);
void *tes_memalign(size_t alignment, size_t size);
void *tes_valloc(size_t size);
void *tes_pvalloc(size_t size);
/* Bytes usable at ptr: exactly the size of the block's class (0 for NULL).
 * In the hardened build (libtessera-secure.so) it is the size that was
 * requested: the bytes past it hold the canary that detects overflows at
 * free, so they must not be handed out as usable. The statistics and
 * tes_heap_visit count whole blocks of the class in both builds, less, in
 * the hardened build, the padding that holds the canary and the size. */
size_t tes_usable_size(const void *ptr);
/* The largest alignment tes_aligned_alloc and friends honour: 1 GiB, the
 * largest huge page (glibc serves any alignment the kernel can map; this
 * was 64 MiB, and posix_memalign of a 1 GiB-aligned buffer failed with
 * ENOMEM). A block aligned beyond 4 MiB starts that far into its own
 * segment: address space, not memory (only the header page is touched). */
#define TES_MAX_ALIGNMENT ((size_t)1 << 30)

/* ---- Returning memory to the OS ----------------------------------------- */
/* Purge what is free now. force=false: what is due in every heap (retired
 * pages) and in the shared caches, and the calling thread's bins and
 * remote frees (of its default heap and of the first-class heaps it made);
 * force=true: also ignore purge delays and drop the retained
 * segment cache, returning everything that can be returned at once (other
 * threads' bins and remote-free stacks stay: only their owners touch them). */
void tes_collect(bool force);
/* The purge delay in effect now, in ms: TESSERA_PURGE_DELAY_MS, doubled (up
 * to 4 times) while freed memory keeps being wanted again soon after it was
 * purged, and halved again after a second without that. Memory freed now
 * goes back to the OS this long after: on a later allocation slow path of
 * any thread, or, with TESSERA_PURGE_THREAD=1, by a background thread even
 * when the program stops calling the allocator. */
long tes_purge_delay_current(void);
/* When the next freed memory goes back: ms until the earliest purge still
 * waiting (retired pages of any heap, the segment cache, the unused tails
 * of large blocks), 0 when one is due now (the next slow path or
 * tes_collect(false) runs it), -1 when no such purge waits. A program (or
 * a test) that wants the memory it freed returned can call
 * tes_collect(false) until this is -1, without guessing how long the delay
 * and the load make it take. Not counted, as tes_collect(false) does not
 * reach them: pages that blocks of exited threads emptied when freed
 * (tes_collect(true) takes them over, as later slow paths do), and other
 * live threads' bins and emptied pages not yet retired (their owners'
 * next slow paths). */
long tes_purge_pending_ms(void);

/* ---- Statistics ---------------------------------------------------------- */
/* Counters are kept per thread and merged on demand by tes_stats_get, so
 * keeping them costs nothing measurable on the fast path. */
#define TES_STATS_MAX_CLASSES 128

typedef struct tes_stat_pair_s {
  int64_t current;
  int64_t peak;
} tes_stat_pair_t;

typedef struct tes_stats_s {
  /* calls per API */
  uint64_t malloc_calls, calloc_calls, realloc_calls, free_calls;
  uint64_t aligned_calls;              /* aligned_alloc, posix_memalign, memalign, valloc, pvalloc */
  uint64_t failed_calls;               /* calls that returned NULL / ENOMEM */
  uint64_t fast_path_hits;             /* small allocations served by the inline fast path */
  uint64_t fast_path_misses;           /* small allocations that took the slow path */
  uint64_t cross_thread_frees;         /* frees of blocks owned by another thread */
  uint64_t realloc_in_place;           /* reallocs that did not move */
  uint64_t huge_remaps;                /* huge reallocs done by mremap */
  /* memory, in bytes */
  tes_stat_pair_t in_use;              /* usable bytes of live blocks */
  tes_stat_pair_t committed;           /* memory backed (or allowed to be backed) by the OS */
  tes_stat_pair_t reserved;            /* address space mapped */
  tes_stat_pair_t large_in_use;        /* live blocks above the largest size class */
  int64_t fragmentation_bytes;         /* committed - in_use */
  double fragmentation_percent;        /* 100 * fragmentation / committed */
  /* OS traffic */
  uint64_t os_mmap_calls, os_munmap_calls, os_madvise_calls, os_mremap_calls;
  uint64_t os_mmap_bytes, os_munmap_bytes, os_purged_bytes;
  /* threads and heaps */
  uint64_t threads_started, threads_exited;
  uint64_t heaps_abandoned, heaps_reclaimed;
  /* per size class: class index -> block size, calls, live blocks */
  uint32_t class_count;
  uint64_t class_block_size[TES_STATS_MAX_CLASSES];
  uint64_t class_malloc_calls[TES_STATS_MAX_CLASSES];
  int64_t class_live_blocks[TES_STATS_MAX_CLASSES];
} tes_stats_t;

void tes_stats_get(tes_stats_t *out);
void tes_stats_print(FILE *out);   /* human-readable; NULL means stderr */
void tes_stats_reset(void);        /* zero the call counters (not the memory gauges) */

/* ---- Options -------------------------------------------------------------- */
/* Every option is also read from the environment at start-up as TESSERA_<NAME>
 * (e.g. TESSERA_PURGE_DELAY_MS=100). An invalid value prints one warning that
 * names the variable and the accepted range, and keeps the default. */
typedef enum tes_option_e {
  TES_OPTION_SHOW_STATS,        /* print statistics to stderr at exit (0/1) */
  TES_OPTION_VERBOSE,           /* diagnostic messages (0/1) */
  TES_OPTION_PURGE_DELAY_MS,    /* delay before free pages go back to the OS (ms; 0 = at once) */
  TES_OPTION_SEGMENT_CACHE,     /* fully free segments kept mapped for reuse */
  TES_OPTION_HUGE_PAGES,        /* transparent huge pages for segments (0/1) */
  TES_OPTION_PURGE_DECOMMIT,    /* 1: MADV_DONTNEED (RSS drops at once), 0: MADV_FREE */
  TES_OPTION_SECURE,            /* read-only: 1 in the hardened build (libtessera-secure), else 0 */
  TES_OPTION_ABORT_ON_ERROR,    /* 1: abort on a detected heap error, 0: report and continue */
  TES_OPTION_BINS,              /* 1: per-class bins of recently freed blocks (default build), 0: off */
  TES_OPTION_PURGE_THREAD,      /* 1: a background thread returns freed memory of idle threads (0/1) */
  TES_OPTION_HEAP_PARK,         /* 1: an exited thread's heap waits whole for the next new thread (both builds), 0: abandoned at once */
  TES_OPTION_LARGE_PACK,        /* 1 (default build's default): large blocks up to 1 MiB share 4 MiB segments; 0 (hardened build): a segment each */
  TES_OPTION_COUNT
} tes_option_t;

long tes_option_get(tes_option_t option);
/* Returns 0, or EINVAL when the option or the value is out of range. */
int tes_option_set(tes_option_t option, long value);
/* "show_stats", ...; the environment variable is TESSERA_ + upper case. */
const char *tes_option_name(tes_option_t option);

/* ---- First-class heaps ----------------------------------------------------- */
/* A heap is a region to allocate many blocks in and drop at once. Blocks from
 * a heap are ordinary blocks: free() from any thread releases one. A heap is
 * used (allocated from) by the thread that created it. A heap its thread
 * neither destroys nor deletes is deleted once the thread is gone (its live
 * blocks stay valid); until then (its key destructors included) the thread
 * may still use, destroy or delete it. */
typedef struct tes_heap_s tes_heap_t;

tes_heap_t *tes_heap_new(void);
void *tes_heap_malloc(tes_heap_t *heap, size_t size);
void *tes_heap_calloc(tes_heap_t *heap, size_t count, size_t size);
void *tes_heap_realloc(tes_heap_t *heap, void *ptr, size_t size);
/* Free every block of the heap at once, then the heap itself. Called by
 * another thread, the heap is only marked (its blocks are dead at once all
 * the same): its thread frees them on its next allocation slow path,
 * tes_heap_new, tes_collect or exit, since only it may change the table
 * that lists its heaps' pages. */
void tes_heap_destroy(tes_heap_t *heap);
/* Delete the heap but keep its live blocks alive: they move to the default
 * heap of the heap's thread and are freed normally later (from any thread).
 * Called by another thread, the heap is only marked: its thread moves the
 * blocks on its next allocation slow path, tes_heap_new, tes_collect or
 * exit, since it may be freeing them at that moment. */
void tes_heap_delete(tes_heap_t *heap);

/* ---- Introspection ---------------------------------------------------------- */
typedef struct tes_block_info_s {
  void *address;
  size_t usable_size;     /* the block's class size (or the large block's size) */
  uint32_t size_class;    /* class index; UINT32_MAX for large blocks */
  const tes_heap_t *heap; /* owning heap */
} tes_block_info_t;

/* Called once per live block; return false to stop the walk. The visitor
 * must not allocate or free from the heap being visited. A tes_collect (or
 * malloc_trim) it calls runs when the outermost walk returns, and so does a
 * tes_heap_delete or tes_heap_destroy of the thread's heaps (the one
 * visited too). The walk of every heap (NULL), or of a heap of another
 * thread, holds a lock: its visitor may call nothing else of the allocator
 * (tes_stats_get, tes_heap_report, another such walk abort with one line on
 * stderr); such a walk sees the pages of a running thread as a snapshot (a
 * block allocated or freed meanwhile may be reported either way). */
typedef bool tes_block_visitor_t(const tes_block_info_t *block, void *arg);
/* Walk every live block of heap (NULL: of every heap in the process). */
void tes_heap_visit(const tes_heap_t *heap, tes_block_visitor_t *visit, void *arg);
/* A per-size-class occupancy summary of all live blocks (the report behind
 * `tessera run --heap-report`). NULL means stderr. */
void tes_heap_report(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
