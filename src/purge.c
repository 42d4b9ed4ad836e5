/* purge.c — how long freed memory waits before it goes back to the OS: the
 * purge delay in effect.
 *
 * TESSERA_PURGE_DELAY_MS (25 ms) is the base. A purge that the program undoes
 * soon after (it needs the page or the segment again, and every 4 KiB of it
 * comes back through a page fault and a page of zeroing) cost time and saved
 * almost nothing: replaying the 64-bit malloc-lab traces purged 105 MiB in
 * 0.37 s, most of it retaken within 100 ms, and took 43,700 page faults
 * against 17,800 with purging held off (docs/PERFORMANCE.md, section purge).
 * So the delay adapts: when purged memory is taken again within
 * PREMATURE_FACTOR times the delay in effect, the delay doubles, up to
 * 2^MAX_LEVEL times the base (at most once per base delay, so one phase's
 * burst of retakes counts once, and a program that keeps retaking reaches
 * the top within a tenth of a second); after CALM_MS without such a retake
 * it halves again.
 * A program that goes quiet still gives its memory back, within 4 times the
 * base (100 ms by default); one that alternates phases stops paying refaults.
 * With the base at 0 (purge at once) nothing adapts. The growth purge
 * (heap.c) has a hold of its own (tes_purge_growth_held, below).
 *
 * State is process-wide: every thread's purges and retakes count. Updated
 * with relaxed atomics; a lost update between racing threads only delays a
 * step. Called from heap.c (page purges), page.c (a purged page taken
 * again) and segment.c (the segment cache). */
#include "internal.h"

#define MAX_LEVEL 2          /* at most 4 times the base */
#define PREMATURE_FACTOR 4   /* retaken within 4 delays of its purge: premature */
#define CALM_MS 1000         /* a second without a premature retake: halve */

static _Atomic int purge_level;
static _Atomic int64_t last_premature_ms; /* the calm clock */
static _Atomic int64_t last_raise_ms;     /* raises at most once per base delay */

int64_t tes_purge_delay(int64_t now) {
  long base = tes_opt(TES_OPTION_PURGE_DELAY_MS);
  if (base <= 0) return base;
  int level = atomic_load_explicit(&purge_level, memory_order_relaxed);
  if (level > 0 && now - atomic_load_explicit(&last_premature_ms, memory_order_relaxed) >= CALM_MS) {
    /* Calm for a second: one step down, and the calm clock restarts. */
    if (atomic_compare_exchange_strong_explicit(&purge_level, &level, level - 1, memory_order_relaxed,
                                                memory_order_relaxed)) {
      atomic_store_explicit(&last_premature_ms, now, memory_order_relaxed);
      level--;
    }
  }
  return (int64_t)base << level;
}

/* The growth purge's pages (heap.c, tes_heap_purge_for_growth) carry their
 * purge time negated: retakes of them within PREMATURE_FACTOR delays hold
 * that purge off for CALM_MS, and leave the delay alone (the delay did not
 * choose that purge; raised by its retakes, it held bench_footprint's
 * freed memory: peak RSS 1.10x). Twenty-fifth session: the hold needs
 * evidence, retakes of GROWTH_HOLD_MIN bytes at least and of a
 * GROWTH_HOLD_SHARE of what growth purges gave back, both counted since
 * the window (restarted every CALM_MS) began. One retake held it: two
 * pages of 64 KiB that bench_footprint's medium phase purged and took back
 * at once held the purge off for the rest of the run, and the large phase
 * then kept the small phase's retired pages beside its fresh memory (peak
 * 133 MB, 116 MB with the purge; PERFORMANCE.md, foot25). */
#define GROWTH_HOLD_MIN ((int64_t)1 << 20)
#define GROWTH_HOLD_SHARE 4 /* retaken at least a quarter of what was purged */
static _Atomic int64_t growth_held_until;
static _Atomic int64_t growth_window_start, growth_purged, growth_retaken;

static void growth_window_roll(int64_t now) {
  int64_t start = atomic_load_explicit(&growth_window_start, memory_order_relaxed);
  if (now - start < CALM_MS) return;
  if (atomic_compare_exchange_strong_explicit(&growth_window_start, &start, now, memory_order_relaxed,
                                              memory_order_relaxed)) {
    atomic_store_explicit(&growth_purged, 0, memory_order_relaxed);
    atomic_store_explicit(&growth_retaken, 0, memory_order_relaxed);
  }
}

void tes_purge_note_growth(int64_t now, size_t bytes) {
  growth_window_roll(now);
  atomic_fetch_add_explicit(&growth_purged, (int64_t)bytes, memory_order_relaxed);
}

void tes_purge_note_retake(int64_t purged_at, size_t bytes) {
  if (purged_at < 0) {
    int64_t now = tes_os_clock_ms(), delay = tes_purge_delay(now);
    if (delay <= 0 || now + purged_at >= PREMATURE_FACTOR * delay) return;
    growth_window_roll(now);
    int64_t retaken = atomic_fetch_add_explicit(&growth_retaken, (int64_t)bytes, memory_order_relaxed) + (int64_t)bytes;
    if (retaken >= GROWTH_HOLD_MIN &&
        retaken * GROWTH_HOLD_SHARE >= atomic_load_explicit(&growth_purged, memory_order_relaxed))
      atomic_store_explicit(&growth_held_until, now + CALM_MS, memory_order_relaxed);
    return;
  }
  tes_purge_note_retake_at(purged_at, tes_os_clock_ms());
}

bool tes_purge_growth_held(int64_t now) {
  return now < atomic_load_explicit(&growth_held_until, memory_order_relaxed);
}

void tes_purge_note_retake_at(int64_t purged_at, int64_t now) {
  long base = tes_opt(TES_OPTION_PURGE_DELAY_MS);
  if (base <= 0 || purged_at <= 0) return; /* eager purging, or a forced purge (tes_collect) */
  int level = atomic_load_explicit(&purge_level, memory_order_relaxed);
  int64_t delay = (int64_t)base << level;
  int64_t idle = now - purged_at;
  if (idle < 0 || idle >= PREMATURE_FACTOR * delay) return;
  atomic_store_explicit(&last_premature_ms, now, memory_order_relaxed);
  if (level < MAX_LEVEL && now - atomic_load_explicit(&last_raise_ms, memory_order_relaxed) >= base &&
      atomic_compare_exchange_strong_explicit(&purge_level, &level, level + 1, memory_order_relaxed,
                                              memory_order_relaxed))
    atomic_store_explicit(&last_raise_ms, now, memory_order_relaxed);
}

TES_API long tes_purge_delay_current(void) { return (long)tes_purge_delay(tes_os_clock_ms()); }

/* ---- the purge thread (TESSERA_PURGE_THREAD=1) ----------------------------
 * Purges run on slow paths, so a program that frees memory and then stops
 * calling the allocator (a server gone idle, a tool waiting for input) keeps
 * that memory resident for good. With the option on, one thread, started
 * when the library is loaded (init.c, tes_constructor; on a malloc slow path
 * when the option is turned on later), sleeps until the earliest pending purge of any heap or
 * of the segment cache is due, purges what is due, and sleeps again; with
 * nothing pending it parks until a purge is scheduled (tes_purge_thread_notify
 * wakes it) or a second has passed (to see whether it is the last thread
 * left, below): one wakeup a second while the program is idle. It never allocates;
 * it takes a heap's purge lock only with a trylock (an owner holding it is on
 * its slow path and purges by itself), and holds no lock while it sleeps, so
 * fork's prepare handler never waits long for it. A fork child has no such
 * thread; it starts its own on its first slow path. */
enum { PURGE_THREAD_NONE, PURGE_THREAD_RUNNING, PURGE_THREAD_FAILED };
static _Atomic int purge_thread_state;
static _Atomic int purge_thread_parked; /* 1: waiting for work (futex word) */

#define PURGE_THREAD_MIN_MS 2     /* shortest sleep: work was due but its heap was busy */
#define PURGE_THREAD_CHECK_MS 1000 /* longest sleep: how soon it sees it is the last thread */

/* The earliest pending purge anywhere (INT64_MAX: none); purges what is due
 * at `now` first when `purge`. */
static int64_t purge_round(int64_t now, bool purge) {
  if (purge) tes_heap_abandon_parked(now - tes_purge_delay(now), UINT32_MAX); /* exited threads' heaps no thread took */
  int64_t next = purge ? tes_heaps_purge(now, false) : tes_heaps_purge_next();
  if (purge) tes_cache_purge(false);
  int64_t cache_next = tes_cache_purge_due(), tail_next = tes_large_tail_due();
  if (tail_next < cache_next) cache_next = tail_next;
  return cache_next < next ? cache_next : next;
}

/* The public view of the same schedule (tessera.h): ms until the earliest
 * purge still waiting, 0 when one is due now, -1 when nothing waits. */
TES_API long tes_purge_pending_ms(void) {
  int64_t now = tes_os_clock_ms(), next = purge_round(now, false);
  if (next == INT64_MAX) return -1;
  return next <= now ? 0 : (long)(next - now);
}

/* A process ends when its last thread does: a program whose main thread
 * leaves by pthread_exit (or a fork child whose only thread was not the
 * main one, which is how Python's test_threading found it) would live on
 * for ever with this thread. So it leaves once it is the only thread. */
static void *purge_thread_main(void *unused) {
  (void)unused;
  int64_t checked = tes_os_clock_ms();
  for (;;) {
    int64_t now = tes_os_clock_ms();
    if (now - checked >= PURGE_THREAD_CHECK_MS) {
      checked = now;
      if (tes_os_thread_count() == 1) {
        atomic_store(&purge_thread_state, PURGE_THREAD_NONE);
        return NULL;
      }
    }
    int64_t next = tes_opt(TES_OPTION_PURGE_THREAD) ? purge_round(now, true) : INT64_MAX;
    if (next != INT64_MAX) {
      int64_t wait = next - now;
      if (wait > PURGE_THREAD_CHECK_MS) wait = PURGE_THREAD_CHECK_MS;
      tes_os_wait((int *)&purge_thread_parked, 0, wait < PURGE_THREAD_MIN_MS ? PURGE_THREAD_MIN_MS : wait);
      continue;
    }
    /* Park. A purge scheduled after the round above either sees the flag
     * (and wakes us) or is seen by the second look (both sides are
     * sequentially consistent). */
    atomic_store(&purge_thread_parked, 1);
    atomic_thread_fence(memory_order_seq_cst);
    if (tes_opt(TES_OPTION_PURGE_THREAD) && purge_round(0, false) != INT64_MAX) {
      atomic_store(&purge_thread_parked, 0);
      continue;
    }
    /* Woken by a new purge, or after a second, to look at the thread count. */
    tes_os_wait((int *)&purge_thread_parked, 1, PURGE_THREAD_CHECK_MS);
    atomic_store(&purge_thread_parked, 0);
  }
  return NULL;
}

void tes_purge_thread_notify(void) {
  if (tes_likely(atomic_load_explicit(&purge_thread_state, memory_order_relaxed) != PURGE_THREAD_RUNNING)) return;
  atomic_thread_fence(memory_order_seq_cst); /* the new expiry before the flag (see the parking) */
  if (atomic_load_explicit(&purge_thread_parked, memory_order_relaxed) && atomic_exchange(&purge_thread_parked, 0))
    tes_os_wake((int *)&purge_thread_parked);
}

void tes_purge_thread_start(void) {
  if (tes_likely(!tes_opt(TES_OPTION_PURGE_THREAD))) return;
  int state = atomic_load_explicit(&purge_thread_state, memory_order_relaxed);
  if (state != PURGE_THREAD_NONE || tes_holds_fork_locks()) return; /* in a fork: the child starts its own */
  if (!atomic_compare_exchange_strong(&purge_thread_state, &state, PURGE_THREAD_RUNNING)) return;
  if (!tes_os_thread_start(purge_thread_main, "tessera-purge")) {
    atomic_store(&purge_thread_state, PURGE_THREAD_FAILED);
    if (tes_opt(TES_OPTION_VERBOSE)) tes_message("warning: cannot start the purge thread; purging on slow paths only");
  }
}

void tes_purge_thread_after_fork(void) {
  int running = PURGE_THREAD_RUNNING;
  atomic_compare_exchange_strong(&purge_thread_state, &running, PURGE_THREAD_NONE);
  atomic_store(&purge_thread_parked, 0);
}
