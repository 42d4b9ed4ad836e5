/* init.c — process and thread life cycle.
 *
 * Process: tes_process_init() runs on the first slow path (which may come
 * from the dynamic loader, from dlsym's calloc, or from a static binary's
 * start-up, before any constructor) and does only allocation-free work: page
 * size, options from the environment, a random key. A constructor then
 * registers the fork handlers; a destructor prints statistics if asked.
 * Thread: the first malloc of a thread gives it a heap (tes_thread_heap_init)
 * and registers a pthread key whose destructor abandons the heap at thread
 * exit, so live threads adopt its segments (no leak over thread churn). The
 * key is created lazily with pthread_key_create, which does not allocate; the
 * TLS pointer is set *before* pthread_setspecific, which may itself call
 * calloc, so that recursion is an ordinary allocation.
 * Fork: prepare takes every allocator lock (fixed order: heaps, segments,
 * cache, abandoned, large, stats), parent releases them, child resets them, so the
 * child can allocate at once even if another thread was inside the allocator.
 * Other threads' heaps stay as they were in the child (their ids are never
 * reused, so nobody mistakes their pages for its own). */
#include "internal.h"

#include <pthread.h>
#include <unistd.h>

__thread tes_heap_t *tes_tls_heap __attribute__((tls_model("initial-exec"))) = &tes_heap_empty;

tes_heap_t tes_heap_empty = {
    .direct = {[0 ... TES_DIRECT_COUNT - 1] = &tes_page_empty},
    .direct_bin = {[0 ... TES_DIRECT_COUNT - 1] = &tes_heap_empty.bins[0]}, /* empty, room 0 */
    .slice_tag = {[0 ... TES_SLICE_SLOTS - 1] = UINTPTR_MAX},
    .thread_id = TES_TID_NONE,
    .is_static = true,
};

/* The TLS heap of a thread whose heap was abandoned at exit: like the empty
 * heap (a malloc from a later destructor gets a new heap), but a free does
 * not create one just to count itself. */
tes_heap_t tes_heap_exited = {
    .direct = {[0 ... TES_DIRECT_COUNT - 1] = &tes_page_empty},
    .direct_bin = {[0 ... TES_DIRECT_COUNT - 1] = &tes_heap_exited.bins[0]}, /* empty, room 0 */
    .slice_tag = {[0 ... TES_SLICE_SLOTS - 1] = UINTPTR_MAX},
    .thread_id = TES_TID_NONE,
    .is_static = true,
};

uintptr_t tes_process_key;
static _Atomic int process_state; /* 0 not started, 1 running, 2 done */
static _Atomic uint64_t random_counter;
static _Atomic uintptr_t next_thread_id = TES_TID_FIRST;

static pthread_key_t thread_key;
static _Atomic int thread_key_state; /* 0 none, 1 creating, 2 ready, 3 failed */

bool tes_process_ready(void) { return atomic_load_explicit(&process_state, memory_order_acquire) == 2; }

uint64_t tes_random_next(void) {
  /* splitmix64 over a shared Weyl sequence: cheap, thread-safe, good enough for keys. */
  uint64_t z = atomic_fetch_add_explicit(&random_counter, 0x9e3779b97f4a7c15ull, memory_order_relaxed);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void tes_process_init(void) {
  int state = atomic_load_explicit(&process_state, memory_order_acquire);
  if (state == 2) return;
  if (state == 0 && atomic_compare_exchange_strong(&process_state, &state, 1)) {
    tes_os_init();
    atomic_store(&random_counter, tes_os_random_seed());
    tes_process_key = (uintptr_t)tes_random_next();
    tes_options_init();
    if (tes_opt(TES_OPTION_VERBOSE))
      tes_message("libtessera %d.%d%s: page size %zu, purge delay %ld ms (%s), segment cache %ld, huge pages %ld",
                  TESSERA_VERSION_MAJOR, TESSERA_VERSION_MINOR, TES_SECURE ? " (hardened)" : "", tes_os_page_size(),
                  tes_opt(TES_OPTION_PURGE_DELAY_MS), tes_opt(TES_OPTION_PURGE_DECOMMIT) ? "MADV_DONTNEED" : "MADV_FREE",
                  tes_opt(TES_OPTION_SEGMENT_CACHE), tes_opt(TES_OPTION_HUGE_PAGES));
    atomic_store_explicit(&process_state, 2, memory_order_release);
    return;
  }
  while (atomic_load_explicit(&process_state, memory_order_acquire) != 2) tes_os_yield();
}

static void thread_done(void *value) {
  (void)value;
  tes_heap_t *heap = tes_tls_heap;
  if (heap->is_static) return;
  tes_tls_heap = &tes_heap_exited;
  tes_heap_abandon(heap);
  tes_stats_thread_exited();
}

static void thread_key_register(tes_heap_t *heap) {
  int state = atomic_load_explicit(&thread_key_state, memory_order_acquire);
  if (state == 0 && atomic_compare_exchange_strong(&thread_key_state, &state, 1)) {
    state = pthread_key_create(&thread_key, thread_done) == 0 ? 2 : 3;
    atomic_store_explicit(&thread_key_state, state, memory_order_release);
  }
  while ((state = atomic_load_explicit(&thread_key_state, memory_order_acquire)) == 1) tes_os_yield();
  if (state == 2) pthread_setspecific(thread_key, heap);
}

tes_heap_t *tes_thread_heap_init(void) {
  if (!tes_tls_heap->is_static) return tes_tls_heap;
  tes_process_init();
  tes_heap_t *heap = tes_heap_alloc_struct();
  if (heap == NULL) return NULL;
  tes_heap_setup(heap, atomic_fetch_add(&next_thread_id, 1), NULL);
  heap->is_default = true;
  tes_tls_heap = heap;
  tes_stats_thread_started();
  thread_key_register(heap);
  return heap;
}

/* ---- fork --------------------------------------------------------------------- */
static void fork_prepare(void) {
  tes_heaps_lock();
  tes_segments_lock();
  tes_segment_locks_acquire();
  tes_large_lock();
  tes_lock(&tes_stats_lock);
}
static void fork_parent(void) {
  tes_unlock(&tes_stats_lock);
  tes_large_unlock(false);
  tes_segment_locks_release(false);
  tes_segments_unlock(false);
  tes_heaps_unlock();
}
static void fork_child(void) {
  tes_lock_reset(&tes_stats_lock);
  tes_large_unlock(true);
  tes_segment_locks_release(true);
  tes_segments_unlock(true);
  tes_heaps_lock_reset();
}

__attribute__((constructor(101))) static void tes_constructor(void) {
  tes_process_init();
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

__attribute__((destructor(101))) static void tes_destructor(void) {
  if (tes_opt(TES_OPTION_SHOW_STATS)) tes_stats_print_at_exit();
}
