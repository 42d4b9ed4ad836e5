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
 * With the base at 0 (purge at once) nothing adapts.
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

void tes_purge_note_retake(int64_t purged_at) {
  long base = tes_opt(TES_OPTION_PURGE_DELAY_MS);
  if (base <= 0 || purged_at <= 0) return; /* eager purging, or a forced purge (tes_collect) */
  int64_t now = tes_os_clock_ms();
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
