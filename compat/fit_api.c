/* fit_api.c — the public functions of my_malloc.h: which arena serves which
 * call, the naive/fast switch, the thread heaps of ts_malloc_nolock, and the
 * segment accounting.
 *
 * Arenas: one for ff_, one for bf_, one behind a mutex for ts_malloc_lock,
 * and FIT_MAX_THREAD_ARENAS for ts_malloc_nolock, claimed by a thread on its
 * first call and handed back when it exits (a pthread key destructor), so
 * thread churn reuses heaps instead of leaking them. All arena state is static:
 * nothing here allocates. Every block header names its arena, so every free
 * function can route any block home; a block freed by a thread that does not
 * own its heap is pushed on the owner's lock-free remote_frees stack and
 * coalesced by the owner on its next ts_malloc_nolock. A thread that finds no
 * free thread arena (more than FIT_MAX_THREAD_ARENAS alive) falls back to the
 * locked arena.
 *
 * fork(): pthread_atfork handlers (registered once, at the first use of any
 * arena; glibc keeps the first registrations in static storage, so this does
 * not allocate) take the locked arena's mutex and then the break lock before
 * the fork, in the order the allocator itself takes them, and release them
 * after it, so a child forked while another thread was inside
 * ts_malloc_lock or growing the break does not inherit a held lock. Thread
 * heaps of threads that do not exist in the child stay claimed there.
 *
 * The remote path reads only the header's owner field, which nobody writes
 * while the block is allocated; the owner may be rewriting the neighbouring
 * fields (prev_units, prev_free, the FIT_LAST flag) at the same time, which
 * are separate memory locations.
 */
#include "my_malloc.h"
#include "fit_arena.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The shared library exports only the API of my_malloc.h. */
#define FIT_API __attribute__((visibility("default")))

static fit_arena_t fit_ff_arena = {.id = FIT_ARENA_FF, .policy = FIT_FIRST_FIT};
static fit_arena_t fit_bf_arena = {.id = FIT_ARENA_BF, .policy = FIT_BEST_FIT};
static fit_arena_t fit_locked_arena = {.id = FIT_ARENA_LOCKED, .policy = FIT_BEST_FIT};
static pthread_mutex_t fit_locked_mutex = PTHREAD_MUTEX_INITIALIZER;
static fit_arena_t fit_thread_arenas[FIT_MAX_THREAD_ARENAS];

static _Thread_local fit_arena_t *fit_my_arena;
static pthread_key_t fit_thread_key;
static pthread_once_t fit_thread_key_once = PTHREAD_ONCE_INIT;

static pthread_once_t fit_fork_once = PTHREAD_ONCE_INIT;

static void fit_fork_prepare(void) {
  pthread_mutex_lock(&fit_locked_mutex);
  fit_brk_fork_prepare();
}
static void fit_fork_parent(void) {
  fit_brk_fork_parent();
  pthread_mutex_unlock(&fit_locked_mutex);
}
static void fit_fork_child(void) {
  fit_brk_fork_child();
  pthread_mutex_init(&fit_locked_mutex, NULL);
}
static void fit_register_fork_handlers_once(void) {
  (void)pthread_atfork(fit_fork_prepare, fit_fork_parent, fit_fork_child);
}
void fit_register_fork_handlers(void) { pthread_once(&fit_fork_once, fit_register_fork_handlers_once); }

static atomic_int fit_impl_choice; /* 0 = not read yet, 1 = naive, 2 = fast */

int fit_use_naive(void) {
  int v = atomic_load_explicit(&fit_impl_choice, memory_order_relaxed);
  if (v == 0) {
    const char *e = getenv("TESSERA_FIT_IMPL"); /* getenv does not allocate */
    v = (e && strcmp(e, "naive") == 0) ? 1 : 2;
    if (e && v == 2 && strcmp(e, "fast") != 0 && *e) fit_warn_env("TESSERA_FIT_IMPL", e, "naive or fast; using fast");
    atomic_store_explicit(&fit_impl_choice, v, memory_order_relaxed);
  }
  return v == 1;
}

static fit_arena_t *const fit_fixed_arenas[FIT_ARENA_LOCKED + 1] = {
    NULL, &fit_ff_arena, &fit_bf_arena, &fit_locked_arena};

/* On every free: a table for the three fixed arenas, an index for the rest. */
static inline fit_arena_t *fit_arena_lookup(uint32_t id) {
  if (id <= FIT_ARENA_LOCKED) return fit_fixed_arenas[id];
  if (id - FIT_ARENA_THREAD0 < FIT_MAX_THREAD_ARENAS) return &fit_thread_arenas[id - FIT_ARENA_THREAD0];
  return NULL;
}

fit_arena_t *fit_arena_by_id(uint32_t id) { return fit_arena_lookup(id); }

unsigned fit_arena_count(void) { return FIT_ARENA_THREAD0 + FIT_MAX_THREAD_ARENAS; }

static inline fit_arena_t *ready(fit_arena_t *a) {
  if (__builtin_expect(a->index_kind == FIT_INDEX_NONE, 0)) fit_arena_prepare(a);
  return a;
}

/* Is b plausibly an allocated block of ours? Reports and returns 0 if not. */
static inline int fit_check_freeable(const char *who, fit_block_t *b) {
  size_t size = fit_size(b);
  if (size < FIT_MIN_BLOCK || size % FIT_ALIGN != 0) {
    fit_report_bad_free(who, fit_payload(b), "not a block from this allocator; ignored");
    return 0;
  }
  if (fit_is_free(b)) {
    fit_report_bad_free(who, fit_payload(b), "double free; ignored");
    return 0;
  }
  return 1;
}

static void fit_push_remote(const char *who, fit_arena_t *owner, fit_block_t *b) {
  /* Already free (its owner freed it, or took it back from this stack, or
   * it merged into a free predecessor, whose old header keeps the flag):
   * a double free, reported like the other variants report one. Pushing it
   * would write the stack's link over the free block's index links, and
   * the owner's drain would free it again. Before, only remote_freed was
   * looked at, which is clear again once the owner has the block. The size
   * word of an allocated block is written by its owner only atomically
   * (the FIT_LAST of fit_brk.c), so this read races with nothing on a
   * valid free. */
  uint64_t flags = __atomic_load_n(&b->size_flags, __ATOMIC_RELAXED);
  size_t size = (size_t)(flags & FIT_SIZE_MASK);
  if (size < FIT_MIN_BLOCK || size % FIT_ALIGN != 0) {
    fit_report_bad_free(who, fit_payload(b), "not a block from this allocator; ignored");
    return;
  }
  if (flags & FIT_FREE) {
    fit_report_bad_free(who, fit_payload(b), "double free; ignored");
    return;
  }
  /* Freed twice by other threads before its owner took it back, the block
   * would be pushed twice and link to itself: the owner's drain would never
   * end. The header's byte says it is on its way already. */
  if (__atomic_exchange_n(&b->remote_freed, 1, __ATOMIC_RELAXED)) {
    fit_report_bad_free(who, fit_payload(b), "double free; ignored");
    return;
  }
  fit_block_t **link = (fit_block_t **)fit_payload(b);
  fit_block_t *head = atomic_load_explicit(&owner->remote_frees, memory_order_relaxed);
  do {
    *link = head;
  } while (!atomic_compare_exchange_weak_explicit(&owner->remote_frees, &head, b, memory_order_release,
                                                  memory_order_relaxed));
}

/* The owner takes back the blocks other threads freed. */
static void fit_drain_remote(fit_arena_t *a) {
  if (!atomic_load_explicit(&a->remote_frees, memory_order_relaxed)) return;
  fit_block_t *b = atomic_exchange_explicit(&a->remote_frees, NULL, memory_order_acquire);
  while (b) {
    fit_block_t *next = *(fit_block_t **)fit_payload(b); /* read before free reuses it */
    __atomic_store_n(&b->remote_freed, 0, __ATOMIC_RELAXED);
    if (fit_check_freeable("ts_free_nolock", b)) fit_arena_free(a, b);
    b = next;
  }
}

/* Every free function: route the block to the arena that owns it. Out of
 * line: inlined into bf_free/ts_free_nolock, its mutex path made them save
 * four registers on every call, a sixth of bf_free's instructions. */
static __attribute__((noinline)) void fit_free_any(const char *who, void *ptr) {
  if (!ptr) return;
  if (!fit_brk_may_own(ptr)) {
    fit_report_bad_free(who, ptr, "not a block from this allocator; ignored");
    return;
  }
  fit_block_t *b = fit_header_of(ptr);
  fit_arena_t *a = fit_arena_lookup(b->owner);
  if (__builtin_expect(!a || a->index_kind == FIT_INDEX_NONE, 0)) {
    fit_report_bad_free(who, ptr, "not a block from this allocator; ignored");
    return;
  }
  if (a == &fit_bf_arena || a == &fit_ff_arena) {
    if (fit_check_freeable(who, b)) fit_arena_free(a, b);
  } else if (a->id >= FIT_ARENA_THREAD0 && a != fit_my_arena) {
    fit_push_remote(who, a, b);
  } else if (a == &fit_locked_arena) {
    pthread_mutex_lock(&fit_locked_mutex);
    if (fit_check_freeable(who, b)) fit_arena_free(a, b);
    pthread_mutex_unlock(&fit_locked_mutex);
  } else if (fit_check_freeable(who, b)) {
    fit_arena_free(a, b);
  }
}

/* Fast paths: when the arena uses the index its policy normally gets, call
 * the allocator instantiated for that index (fit_arena.h) so the index
 * switch folds away; otherwise (naive, or first use) the generic one. */
static inline __attribute__((always_inline)) void *fit_malloc_on(fit_arena_t *a, size_t size,
                                                                 fit_index_kind_t kind) {
  if (__builtin_expect(a->index_kind == kind, 1)) return fit_arena_malloc_k(a, size, kind);
  return fit_arena_malloc(ready(a), size);
}

/* Frees ptr here if it is a block of arena a and a uses `kind`; returns 0
 * when the generic route (fit_free_any) must decide. */
static inline __attribute__((always_inline)) int fit_free_on(const char *who, void *ptr, fit_arena_t *a,
                                                             fit_index_kind_t kind) {
  if (!fit_brk_may_own(ptr) || a->index_kind != kind) return 0; /* NULL and misaligned included */
  fit_block_t *b = fit_header_of(ptr);
  if (b->owner != a->id) return 0;
  if (fit_check_freeable(who, b)) fit_arena_free_k(a, b, kind);
  return 1;
}

FIT_API void *ff_malloc(size_t size) { return fit_malloc_on(&fit_ff_arena, size, FIT_INDEX_ADDR_TREE); }
FIT_API void ff_free(void *ptr) {
  if (!fit_free_on("ff_free", ptr, &fit_ff_arena, FIT_INDEX_ADDR_TREE)) fit_free_any("ff_free", ptr);
}
/* The fast path of best fit on a binned arena (bf_, ts_nolock), in the
 * manner of mimalloc's: an exact fit is the head of one bin, and a block
 * whose neighbours are both in use goes straight onto its bin. A request
 * with no exact fit takes the next larger binned block
 * (fit_bins_malloc_larger); everything else (the size tree, growing the
 * break, coalescing, large blocks, bad frees) takes the general
 * out-of-line path. */

/* No exact fit for a binned request: the head of the smallest non-empty
 * larger bin, split as fit_arena_malloc_k splits (the back is handed out),
 * so the blocks chosen are exactly those of the general path; that path
 * serves the request when no binned block is large enough. Kept out of
 * line: a quarter of the small-range workload's mallocs come here. */
static __attribute__((noinline)) void *fit_bins_malloc_larger(fit_arena_t *a, size_t size, size_t need) {
  size_t i = need / FIT_ALIGN + 1; /* bin need/16 is empty */
  size_t j = i < FIT_BIN_COUNT ? bin_search(a, i) : FIT_BIN_COUNT;
  if (j >= FIT_BIN_COUNT) /* also every request of an arena that is not binned (below) */
    return a->index_kind == FIT_INDEX_SIZE_BINS ? fit_bins_arena_malloc(a, size) : fit_arena_malloc(ready(a), size);
  fit_block_t *b = a->bins[j];
  fit_size_index_pop(a, j, b);
  size_t have = j * FIT_ALIGN;
  uint64_t last = b->size_flags & FIT_LAST;
  if (have - need < FIT_MIN_BLOCK) { /* the remainder could not hold a block */
    fit_set_size(b, have, last);
    b->size_flags |= fit_stamp_now(a); /* the neighbours' bytes may stay stale */
    fit_add_free_bytes(a, -(long)have);
    return fit_payload(b);
  }
  if (fit_carve_front(b)) {
    b = fit_split_front_k(a, b, have, need, FIT_INDEX_SIZE_BINS);
    b->size_flags |= fit_stamp_now(a);
    fit_add_free_bytes(a, -(long)need);
    return fit_payload(b);
  }
  size_t rest = have - need;
  fit_set_size(b, rest, FIT_FREE); /* the front stays free, neighbour bytes unchanged */
  fit_size_index_insert(a, b);
  fit_block_t *back = fit_split_back_block(a, b, rest, need, last);
  fit_add_free_bytes(a, -(long)need);
  return fit_payload(back);
}

/* No test of the arena's index kind here: the bins of an arena that does
 * not use them (naive, or not used yet) stay empty, so its requests reach
 * fit_bins_malloc_larger, which finds no binned block and sends them to the
 * generic path (the checker verifies that such bins are empty). */
static inline __attribute__((always_inline)) void *fit_bins_malloc(fit_arena_t *a, size_t size) {
  if (__builtin_expect(size < FIT_BIN_LIMIT - FIT_HEADER_SIZE - FIT_ALIGN, 1)) {
    size_t need = (size + FIT_HEADER_SIZE + FIT_ALIGN - 1) & ~(size_t)(FIT_ALIGN - 1);
    if (need < FIT_MIN_BLOCK) need = FIT_MIN_BLOCK;
    size_t i = need / FIT_ALIGN;
    fit_block_t *b = a->bins[i];
    if (b) {
      fit_size_index_pop(a, i, b);
      /* The successor's prev_free stays stale: clearing it would cost a
       * store to another line on every exact fit. */
      b->size_flags = (b->size_flags & (FIT_SIZE_MASK | FIT_LAST)) | fit_stamp_now(a);
      fit_add_free_bytes(a, -(long)need);
      return fit_payload(b);
    }
    return fit_bins_malloc_larger(a, size, need);
  }
  return fit_arena_malloc(ready(a), size);
}

/* 1 when ptr, a block of arena a, was freed here; 0 when the general route
 * (fit_free_any) must take it. */
static inline __attribute__((always_inline)) int fit_bins_free(void *ptr, fit_arena_t *a, uint32_t id) {
  if (!fit_brk_may_own(ptr) || a->index_kind != FIT_INDEX_SIZE_BINS) return 0; /* NULL and misaligned included */
  fit_block_t *b = fit_header_of(ptr);
  /* The owner first, alone: another thread's block has header bytes that
   * its owner may be writing right now (FIT_LAST of its top block, cleared
   * when the run grows). TSan saw the size word read too early. */
  if (b->owner != id) return 0;
  uint64_t flags = b->size_flags;
  size_t size = (size_t)(flags & FIT_SIZE_MASK);
  if ((flags & FIT_FREE) || size - FIT_MIN_BLOCK >= FIT_BIN_LIMIT - FIT_MIN_BLOCK) return 0;
  fit_block_t *next = fit_next_phys(b); /* not a block when b ends its run: not read then */
  /* The predecessor may be free only when prev_free says so (the byte may
   * be stale: an exact fit does not clear it). The probe is its header, or
   * b's own (in use, so "not free") when the byte is clear, chosen without
   * a branch: whether the byte is set is a coin toss on the random
   * workloads, and a mispredicted branch there held back the load. */
  size_t prev_offset = (size_t)b->prev_units * FIT_ALIGN & -(size_t)b->prev_free; /* prev_free is 0 or 1 */
  const fit_block_t *prev_probe = (const fit_block_t *)((char *)b - prev_offset);
  /* The last block of a run (rare: one per run) takes the general path
   * too, so the common case has no "is there a successor" test. */
  if ((flags & FIT_LAST) || fit_is_free(next) || fit_is_free(prev_probe)) {
    fit_bins_arena_free(a, b); /* coalescing, or the end of a run */
    return 1;
  }
  b->size_flags = flags | FIT_FREE;
  b->prev_free = 0;
  fit_size_index_insert(a, b);
  next->prev_free = 1; /* its line was just read */
  fit_add_free_bytes(a, (long)size);
  return 1;
}

FIT_API void *bf_malloc(size_t size) { return fit_bins_malloc(&fit_bf_arena, size); }
FIT_API void bf_free(void *ptr) {
  if (!fit_bins_free(ptr, &fit_bf_arena, FIT_ARENA_BF)) fit_free_any("bf_free", ptr);
}

FIT_API void *ts_malloc_lock(size_t size) {
  pthread_mutex_lock(&fit_locked_mutex);
  void *p = fit_arena_malloc(ready(&fit_locked_arena), size);
  pthread_mutex_unlock(&fit_locked_mutex);
  return p;
}
FIT_API void ts_free_lock(void *ptr) { fit_free_any("ts_free_lock", ptr); }

/* Thread exit: hand the heap back; its live blocks stay valid, and frees of
 * them queue on remote_frees for the next thread that claims it. */
static void fit_release_thread_arena(void *arena) {
  fit_arena_t *a = arena;
  if (fit_my_arena == a) fit_my_arena = NULL;
  atomic_store_explicit(&a->claimed, 0, memory_order_release);
}

static void fit_make_thread_key(void) {
  if (pthread_key_create(&fit_thread_key, fit_release_thread_arena) != 0) fit_thread_key = (pthread_key_t)-1;
}

static fit_arena_t *fit_claim_thread_arena(void) {
  pthread_once(&fit_thread_key_once, fit_make_thread_key);
  if (fit_thread_key == (pthread_key_t)-1) return NULL;
  for (unsigned i = 0; i < FIT_MAX_THREAD_ARENAS; i++) {
    fit_arena_t *a = &fit_thread_arenas[i];
    int expected = 0;
    if (atomic_load_explicit(&a->claimed, memory_order_relaxed) != 0 ||
        !atomic_compare_exchange_strong_explicit(&a->claimed, &expected, 1, memory_order_acquire,
                                                 memory_order_relaxed))
      continue;
    if (a->index_kind == FIT_INDEX_NONE) {
      a->id = FIT_ARENA_THREAD0 + i;
      a->policy = FIT_BEST_FIT;
      fit_arena_prepare(a);
    }
    if (pthread_setspecific(fit_thread_key, a) != 0) {
      atomic_store_explicit(&a->claimed, 0, memory_order_release);
      return NULL;
    }
    fit_my_arena = a;
    return a;
  }
  return NULL;
}

FIT_API void *ts_malloc_nolock(size_t size) {
  fit_arena_t *a = fit_my_arena;
  if (__builtin_expect(!a, 0) && !(a = fit_claim_thread_arena())) return ts_malloc_lock(size);
  fit_drain_remote(a);
  return fit_bins_malloc(a, size);
}
FIT_API void ts_free_nolock(void *ptr) {
  fit_arena_t *mine = fit_my_arena;
  if (!mine || !fit_bins_free(ptr, mine, mine->id)) fit_free_any("ts_free_nolock", ptr);
}

FIT_API unsigned long get_data_segment_size(void) { return fit_brk_segment_bytes(); }

FIT_API unsigned long get_data_segment_free_space_size(void) {
  unsigned long sum = 0;
  for (uint32_t id = 1; id < fit_arena_count(); id++) {
    fit_arena_t *a = fit_arena_by_id(id);
    if (a) sum += atomic_load_explicit(&a->free_bytes, memory_order_relaxed);
  }
  return sum;
}
