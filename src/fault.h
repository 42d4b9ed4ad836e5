/* fault.h — test-only fault injection at the OS seam.
 *
 * Compiled into the library only with -DTES_FAULT_INJECTION=1 (the
 * tessera_fault target). Each site is one kind of system call in os.c; a
 * programmed failure makes that call report failure exactly as the kernel
 * would (mmap/mremap: ENOMEM; madvise: the range simply is not purged), so the
 * allocator's own error paths run. Thread-safe; counters are global. */
#ifndef TES_FAULT_H
#define TES_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TES_FAULT_MMAP, TES_FAULT_MREMAP, TES_FAULT_MADVISE, TES_FAULT_SITE_COUNT } tes_fault_site_t;
void tes_fault_fail_nth(tes_fault_site_t site, long n);      /* the n-th call from now fails (1 = next) */
void tes_fault_fail_above(tes_fault_site_t site, size_t bytes); /* every call for more than bytes fails */
void tes_fault_fail_always(tes_fault_site_t site, bool on);
void tes_fault_clear(void);
uint64_t tes_fault_injected(void);                            /* failures injected so far */
/* Memory system calls (mmap, munmap, mremap, madvise, mprotect, mincore)
 * made so far while the calling thread held a process-wide allocator lock:
 * the heaps lock, the abandon lock, the segment cache's, the segment
 * list's, the abandoned list's or the large blocks' (a heap's own purge
 * lock is not one). */
uint64_t tes_fault_locked_syscalls(void);
/* The library's side of that count: does the calling thread hold one? */
bool tes_global_lock_mine(void);
/* The hardened remote free (free.c, tes_free_remote) calls this, when set,
 * between its block's summary bit and its bit: a test widens the window in
 * which the owner's collect takes the summary bit before the bit is set
 * (tests/lib/api_remote_bits_stress.c, rev25). */
extern void (*volatile tes_fault_remote_gap)(void);
/* A packed large block's free (large.c, pack_release, default build) calls
 * this, when set, right before it takes the large lock (where it looked at
 * its host's due, unlocked, until the twenty-sixth session): a test runs
 * the timed purge there (fault.pack_release_purge). */
extern void (*volatile tes_fault_pack_gap)(void);
/* A remote free into a full page (free.c, delayed_push, both builds) calls
 * this, when set, between its block's push onto the owner heap's delayed
 * list and its last store, the page's word from FREEING back to NORMAL: a
 * test has the owner take the block and retire the page there
 * (fault.delayed_retire, race27). */
extern void (*volatile tes_fault_delayed_gap)(void);
/* How many times an owner found a page's word FREEING and yielded to the
 * remote freer (page.c): the test's sign that the owner is waiting. */
uint64_t tes_fault_freeing_waits(void);

#ifdef __cplusplus
}
#endif
#endif
