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
 * Fork: prepare takes every allocator lock (fixed order: report scratch,
 * late heaps, heaps, purge locks, segments, cache, abandoned, large, stats),
 * parent releases them, child
 * resets them, so the child can allocate at once even if another thread was
 * inside the allocator; in between, the forking thread's own lock calls are
 * no-ops (tes_fork_holder), so fork handlers of other libraries that run in
 * that window may allocate.
 * Other threads' heaps stay as they were in the child (their ids are never
 * reused, so nobody mistakes their pages for its own). */
#include "internal.h"

#include <pthread.h>
#include <unistd.h>

TES_BIG_BSS tes_slices_t tes_slices_none; /* zero but slot 0's tag (tes_process_init): misses every pointer */

__thread tes_heap_t *tes_tls_heap __attribute__((tls_model("initial-exec"))) = &tes_heap_empty;
__thread tes_slices_t *tes_tls_slices __attribute__((tls_model("initial-exec"))) = &tes_slices_none;
__thread bool tes_tls_exited __attribute__((tls_model("initial-exec")));

tes_heap_t tes_heap_empty = {
    .direct = {[0 ... TES_DIRECT_COUNT - 1] = &tes_page_empty},
    .direct_bin = {[0 ... TES_DIRECT_COUNT - 1] = &tes_heap_empty.bins[0]}, /* empty, room 0 */
    .bins = {[0 ... TES_CLASS_COUNT - 1] = {.head = TES_BIN_END}},
    .slices = &tes_slices_none,
    .thread_id = TES_TID_NONE,
    .purge_due = INT64_MAX, /* nothing pending, as a new heap says (tes_heap_setup) */
    .kept_purge_due = INT64_MAX,
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
  uint64_t z = tes_rmw_fetch_add64(&random_counter, 0x9e3779b97f4a7c15ull);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void tes_process_init(void) {
  /* The exchange first, not a load: the first access to this page of .bss
   * is then a write, one fault, where a read mapped the zero page and the
   * write faulted again to replace it. Called on rare paths only. */
  int state = 0;
  if (atomic_compare_exchange_strong(&process_state, &state, 1)) {
    tes_os_init();
    atomic_store(&random_counter, tes_os_random_seed());
    tes_process_key = (uintptr_t)tes_random_next();
    tes_options_init();
    /* The static heap's table is zero, so slot 0's tag 0 matches slice 0:
     * the kernel addresses 0xffffffff80010000-0x8001ffff, which a bad
     * free could still pass. The empty-slot tag there (as tes_heap_setup
     * sets for a real heap) sends them to the slow path, which reports
     * them; one page of .bss becomes resident. A free before this point
     * is the loader's or a constructor's, never such a pointer. */
    __atomic_store_n(&tes_slices_none.tag[0], UINTPTR_MAX, __ATOMIC_RELAXED);
    /* The exit reports (statistics, heap report) outlive a program that
     * closes stderr first: every coreutils program does (close_stdout). */
    if (tes_opt(TES_OPTION_SHOW_STATS) || tes_os_getenv("TESSERA_HEAP_REPORT") != NULL) tes_os_keep_stderr();
    if (tes_opt(TES_OPTION_VERBOSE))
      tes_message("libtessera %d.%d%s: page size %zu, purge delay %ld ms (%s), segment cache %ld, huge pages %ld",
                  TESSERA_VERSION_MAJOR, TESSERA_VERSION_MINOR, TES_SECURE ? " (hardened)" : "", tes_os_page_size(),
                  tes_opt(TES_OPTION_PURGE_DELAY_MS), tes_opt(TES_OPTION_PURGE_DECOMMIT) ? "MADV_DONTNEED" : "MADV_FREE",
                  tes_opt(TES_OPTION_SEGMENT_CACHE), tes_opt(TES_OPTION_HUGE_PAGES));
    atomic_store_explicit(&process_state, 2, memory_order_release);
    return;
  }
  if (state == 2) return;
  while (atomic_load_explicit(&process_state, memory_order_acquire) != 2) tes_os_yield();
}

/* ---- late heaps ----------------------------------------------------------------
 * A heap that no key destructor may abandon: one made after its thread's
 * exit began (a destructor of another key allocated after ours ran; in the
 * last of glibc's PTHREAD_DESTRUCTOR_ITERATIONS rounds nothing calls ours
 * again), one made by a free (a thread that only frees may be doing so from
 * such a destructor: nothing tells), or any heap when no pthread key could
 * be created. It waits on this list until its thread is gone for good, and
 * is then abandoned by whichever thread looks next: a thread getting a
 * heap (at most every TES_LATE_REAP_MS) or tes_collect. Without it, a
 * program whose key destructors allocate or free in the last round lost a
 * heap per thread. A listed heap leaves the list when our destructor does
 * run for it. A fourth kind waits here too: a heap whose thread still had
 * first-class heaps when our destructor ran (see thread_done). */
#define TES_LATE_REAP_MS 5
static tes_lock_t late_lock = TES_LOCK_INIT;
static tes_heap_t *late_heaps;
static _Atomic size_t late_count;
static _Atomic int64_t late_reap_due;

static void late_add(tes_heap_t *heap) {
  heap->late_tid = tes_os_thread_id();
  tes_lock(&late_lock);
  heap->late_prev = NULL;
  heap->late_next = late_heaps;
  if (late_heaps != NULL) late_heaps->late_prev = heap;
  late_heaps = heap;
  atomic_fetch_add_explicit(&late_count, 1, memory_order_relaxed);
  tes_unlock(&late_lock);
}

static void late_unlink(tes_heap_t *heap) { /* late_lock held */
  if (heap->late_prev != NULL) heap->late_prev->late_next = heap->late_next;
  else late_heaps = heap->late_next;
  if (heap->late_next != NULL) heap->late_next->late_prev = heap->late_prev;
  atomic_fetch_sub_explicit(&late_count, 1, memory_order_relaxed);
}

static void late_remove(tes_heap_t *heap) {
  tes_lock(&late_lock);
  late_unlink(heap);
  tes_unlock(&late_lock);
  heap->late_tid = 0;
}

static void reap(bool force) {
  if (atomic_load_explicit(&late_count, memory_order_relaxed) == 0) return;
  /* Not inside our fork window: an abandon may wait for a large block that
   * a thread blocked on our locks is moving (tes_large_reassign). It can
   * wait for the next look. */
  if (tes_holds_fork_locks()) return;
  /* One tgkill per listed heap: not on every thread start. */
  int64_t now = tes_os_clock_ms();
  if (!force && now < atomic_load_explicit(&late_reap_due, memory_order_relaxed)) return;
  atomic_store_explicit(&late_reap_due, now + TES_LATE_REAP_MS, memory_order_relaxed);
  tes_heap_t *dead = NULL;
  tes_lock(&late_lock);
  for (tes_heap_t *heap = late_heaps, *next; heap != NULL; heap = next) {
    next = heap->late_next;
    if (tes_os_thread_alive(heap->late_tid)) continue;
    late_unlink(heap);
    heap->late_next = dead;
    dead = heap;
  }
  tes_unlock(&late_lock);
  /* Their threads are gone: nothing but remote frees touches these heaps,
   * and those race with an abandon exactly as with a living owner's. */
  while (dead != NULL) {
    tes_heap_t *heap = dead;
    dead = heap->late_next;
    heap->late_tid = 0;
    tes_heap_abandon(heap);
    tes_stats_thread_exited();
  }
}

void tes_reap_late_heaps(void) { reap(true); }

size_t tes_late_heap_count(void) { return atomic_load_explicit(&late_count, memory_order_relaxed); }

static void thread_done(void *value) {
  (void)value;
  tes_heap_t *heap = tes_tls_heap;
  if (heap->is_static) return;
  tes_tls_heap = &tes_heap_empty;
  tes_tls_slices = tes_heap_empty.slices;
  tes_tls_exited = true;
  if (atomic_load_explicit(&heap->first_class_heaps, memory_order_relaxed) > 0) {
    /* The thread leaves first-class heaps, which tes_heap_abandon deletes
     * into this heap. Not now: a destructor of a key made after ours runs
     * after this one and may still destroy or delete them (a per-thread
     * heap whose key destructor drops it), and the pool could by then have
     * handed their structs to another thread. The heap waits on the late
     * list until its thread is gone. */
    if (heap->late_tid == 0) late_add(heap);
    return;
  }
  if (heap->late_tid != 0) late_remove(heap);
  if (!tes_heap_park(heap)) tes_heap_abandon(heap);
  tes_stats_thread_exited();
}

/* True when thread_done will run for heap at the thread's exit (unless the
 * exit has already passed our destructor: see late heaps). */
static bool thread_key_register(tes_heap_t *heap) {
  int state = atomic_load_explicit(&thread_key_state, memory_order_acquire);
  if (state == 0 && atomic_compare_exchange_strong(&thread_key_state, &state, 1)) {
    state = pthread_key_create(&thread_key, thread_done) == 0 ? 2 : 3;
    atomic_store_explicit(&thread_key_state, state, memory_order_release);
    if (state == 3 && tes_opt(TES_OPTION_VERBOSE))
      tes_message("no pthread key left: thread heaps are abandoned once their threads are gone");
  }
  while ((state = atomic_load_explicit(&thread_key_state, memory_order_acquire)) == 1) tes_os_yield();
  return state == 2 && pthread_setspecific(thread_key, heap) == 0;
}

static tes_heap_t *thread_heap_init(bool late) {
  if (!tes_tls_heap->is_static) return tes_tls_heap;
  late |= tes_tls_exited;
  tes_process_init();
  reap(false);
  uintptr_t id = atomic_fetch_add(&next_thread_id, 1);
  tes_heap_t *heap = tes_heap_unpark(id);
  if (heap == NULL) {
    heap = tes_heap_alloc_struct();
    if (heap == NULL) return NULL;
    tes_heap_setup(heap, id, NULL);
  }
  heap->is_default = true;
  heap->late_tid = 0;
  tes_tls_heap = heap;
  tes_tls_slices = heap->slices;
  tes_stats_thread_started();
  if (!thread_key_register(heap) || late) late_add(heap);
  return heap;
}

tes_heap_t *tes_thread_heap_init(void) { return thread_heap_init(false); }
/* For free(), which must leave errno as it was (POSIX.1-2024, glibc >=
 * 2.33): a thread's first free makes it a heap, and when the heap struct
 * cannot be mapped (a new chunk of the heap pool, out of memory) the failed
 * map's ENOMEM showed through the free. The free goes on without a heap. */
tes_heap_t *tes_thread_heap_init_for_free(void) {
  int saved = errno;
  tes_heap_t *heap = thread_heap_init(true);
  errno = saved;
  return heap;
}

/* ---- fork --------------------------------------------------------------------- */
_Atomic(tes_heap_t *const *) tes_fork_holder;

static void fork_prepare(void) {
  /* Late heaps of threads already gone are abandoned now: the child drops
   * every other thread's late heap from the list (late_heaps_after_fork),
   * so one whose thread ended before the fork was its for good (a thread
   * that left a first-class heap and was joined just before: its whole
   * heap stayed committed in the child). Nothing to do, one load, when the
   * list is empty. */
  reap(true);
  tes_lock(&tes_report_scratch_lock);
  tes_lock(&late_lock);
  tes_abandon_lock_take();
  tes_heaps_lock();
  tes_heaps_purge_locks_acquire();
  tes_segments_lock();
  tes_segment_locks_acquire();
  tes_large_lock();
  tes_lock(&tes_stats_lock);
  atomic_store_explicit(&tes_fork_holder, &tes_tls_heap, memory_order_relaxed);
}
static void fork_parent(void) {
  atomic_store_explicit(&tes_fork_holder, NULL, memory_order_relaxed);
  tes_unlock(&tes_stats_lock);
  tes_large_unlock(false);
  tes_segment_locks_release(false);
  tes_segments_unlock(false);
  tes_heaps_purge_locks_release(false);
  tes_heaps_unlock();
  tes_abandon_lock_give();
  tes_unlock(&late_lock);
  tes_unlock(&tes_report_scratch_lock);
}
/* Other threads' late heaps leave the list: their threads do not exist
 * here, but one may have been in the middle of an allocation at the fork,
 * so their heaps stay as they are, like every other thread's. */
static void late_heaps_after_fork(void) {
  tes_heap_t *mine = late_heaps;
  while (mine != NULL && mine != tes_tls_heap) mine = mine->late_next;
  late_heaps = mine;
  atomic_store_explicit(&late_count, mine != NULL, memory_order_relaxed);
  if (mine != NULL) {
    mine->late_next = mine->late_prev = NULL;
    mine->late_tid = tes_os_thread_id();
  }
}
static void fork_child(void) {
  atomic_store_explicit(&tes_fork_holder, NULL, memory_order_relaxed);
  tes_purge_thread_after_fork();
  late_heaps_after_fork();
  tes_heaps_after_fork_child();
  tes_lock_reset(&late_lock);
  tes_lock_reset(&tes_abandon_lock);
  tes_lock_reset(&tes_report_scratch_lock);
  tes_lock_reset(&tes_stats_lock);
  tes_large_unlock(true);
  tes_segment_locks_release(true);
  tes_segments_unlock(true);
  tes_heaps_purge_locks_release(true);
  tes_heaps_lock_reset();
}

/* With TESSERA_PURGE_THREAD=1 the purge thread starts here, at load, not
 * on the program's first slow path: pthread_create allocates the thread's
 * DTV (ld.so's allocate_dtv, calloc(18, 16): 288 bytes, 312 in use in the
 * hardened build), and that block landed in whatever the program was
 * counting at the time (lib.api_kept_destroy_race's class of 48 bytes, a
 * live block left in lib.api_merge19_stress.secure; review23). The slow
 * path's start stays for the option turned on later and for a fork child. */
__attribute__((constructor(101))) static void tes_constructor(void) {
  tes_process_init();
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  tes_purge_thread_start();
}

__attribute__((destructor(101))) static void tes_destructor(void) {
  if (tes_opt(TES_OPTION_SHOW_STATS)) tes_stats_print_at_exit();
}
