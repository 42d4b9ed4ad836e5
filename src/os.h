/* os.h — the contract between libtessera and the kernel.
 *
 * Every system call the allocator makes goes through one of these primitives
 * (implemented in os.c); nothing else in src/ includes <sys/mman.h>. That
 * keeps the platform surface small and readable, and it is the one seam where
 * the fault-injection build (TES_FAULT_INJECTION, see fault.h) makes mmap,
 * mremap and madvise fail on demand.
 *
 * Memory model: we map read/write and let Linux commit lazily, so "reserve"
 * and "commit" are one step; "purge" gives the physical pages back (RSS drops)
 * while keeping the address range mapped; "unmap" gives the range back.
 * All functions are thread-safe and never allocate. errno: a failed
 * tes_os_map_aligned sets ENOMEM; nothing else here changes it (a failed
 * tes_os_remap neither: its caller moves the block instead), so a malloc, realloc or free that succeeds leaves errno as it was, as
 * glibc's do (a try that failed on the way, such as the in-place mremap of a
 * block that then moves, used to show through as ENOMEM). */
#ifndef TES_OS_H
#define TES_OS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True while the process has one thread: glibc's __libc_single_threaded
 * (2.32 on, <sys/single_threaded.h>), which pthread_create clears before the
 * new thread runs and nothing sets again while another may run. Until
 * tes_os_init, and with a libc without that flag, a constant false. While
 * it holds, the slow paths' locks and read-modify-writes take no locked
 * instruction (internal.h, tes_lock). As glibc's own malloc, this trusts
 * threads to come from pthread_create (a raw clone calling malloc would
 * race). */
extern const char *tes_single_threaded_flag;
static inline bool tes_single_threaded(void) { return *tes_single_threaded_flag != 0; }
/* An atomic add returning the value before it (relaxed); without the lock
 * prefix while the process has one thread (internal.h, TES_RMW_SINGLE, says
 * why). The random counter and os.c's gauges. */
static inline uint64_t tes_rmw_fetch_add64(_Atomic uint64_t *p, uint64_t v) {
#if defined(__x86_64__)
  if (tes_single_threaded()) {
    __asm__ volatile("xaddq %0, %1" : "+r"(v), "+m"(*(uint64_t *)p) : : "memory");
    return v;
  }
#endif
  return atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}

/* Process start-up: page size, counters. Idempotent, allocation-free. */
void tes_os_init(void);
/* The kernel's page size (asked at start, never assumed). */
size_t tes_os_page_size(void);
/* Resident pages of [addr, addr + size), both page-aligned (mincore);
 * SIZE_MAX when the kernel does not say. */
size_t tes_os_resident_pages(void *addr, size_t size);

/* Map `size` fresh zeroed bytes (read/write) whose start is a multiple of
 * `alignment` (a power of two >= page size). NULL on failure (errno=ENOMEM).
 * Above page alignment, tried first at the aligned range just below the
 * last such mapping (one mmap, never replacing a mapping), else over-mapped
 * and trimmed. */
void *tes_os_map_aligned(size_t size, size_t alignment);
/* Give a range obtained from tes_os_map_aligned (or a part of it) back. */
void tes_os_unmap(void *addr, size_t size);
/* Return the physical memory of a range to the OS, keep it mapped.
 * decommit=true: MADV_DONTNEED (RSS drops now, next touch reads zeroes);
 * false: MADV_FREE (reclaimed lazily). Returns true when the range now reads
 * as zero (i.e. MADV_DONTNEED succeeded). */
bool tes_os_purge(void *addr, size_t size, bool decommit);
/* Turn a range into an inaccessible guard (PROT_NONE) / back to read-write. */
bool tes_os_protect(void *addr, size_t size);
bool tes_os_unprotect(void *addr, size_t size);
/* Ask for (or against) transparent huge pages on a range; advisory. */
void tes_os_huge_pages(void *addr, size_t size, bool enable);
/* Resize a mapping keeping its contents and its `alignment`: grows in place
 * when the following addresses are free, otherwise moves the pages (no copy)
 * to a fresh aligned range. NULL on failure, the old mapping is then intact. */
void *tes_os_remap(void *addr, size_t old_size, size_t new_size, size_t alignment);
/* Grow a mapping whose guard pages split it into pieces (the hardened
 * build's large segment: mremap moves one piece at a time), to new_size >
 * old_size, keeping its contents, its `alignment`, and every piece's offset
 * and protection. cuts[0] = 0 < cuts[1] < ... < cuts[count - 1]: where each
 * piece starts; the last one (the block's) runs to the end, or to a one-page
 * PROT_NONE guard that is the mapping's last page when tail_guard. That
 * piece grows: its new bytes read as zero, the page at guard_at (an offset
 * at or beyond old_size, 0: none) is a guard too, and the tail guard ends
 * the new mapping (the old one is gone). In place when the addresses after
 * the mapping are free, else at a fresh aligned range (no copy). NULL on
 * failure, the old mapping then intact and where it was; errno untouched
 * either way. */
void *tes_os_remap_guarded(void *addr, size_t old_size, size_t new_size, size_t alignment, const size_t *cuts,
                           size_t count, bool tail_guard, size_t guard_at);

/* Monotonic clock in milliseconds (vDSO, coarse: advances once per timer
 * tick, 1-4 ms; cheap). */
int64_t tes_os_clock_ms(void);
/* The kernel's id of the calling thread (for messages only). */
long tes_os_thread_id(void);
/* Does a thread of this process with kernel id tid exist? False only once
 * that thread is gone for good (a new thread may reuse the id: then true,
 * which only means "ask again later"). Leaves errno as it was. */
bool tes_os_thread_alive(long tid);
/* Live threads in this process now (/proc/self/stat, read without
 * allocating), or -1 if unknown. A main thread that left by pthread_exit
 * stays counted by the kernel, as a zombie, until the others are gone: it
 * is not counted here. */
long tes_os_thread_count(void);
/* Give up the processor while spinning on a lock. */
void tes_os_yield(void);
/* Block while *word == expected, for at most ms milliseconds (ms < 0: no
 * limit), or until tes_os_wake(word); may return early (signals). */
void tes_os_wait(int *word, int expected, int64_t ms);
void tes_os_wake(int *word);
/* Start a detached thread named `name` running fn(NULL), with every signal
 * blocked in it (a process-directed signal must reach the program's own
 * threads). False if the thread could not be created. The thread library
 * allocates its stack and TLS through malloc and mmap, so the caller must
 * hold no allocator lock. */
bool tes_os_thread_start(void *(*fn)(void *), const char *name);
/* Turn the calling thread's cancelability off, returning what it was, and
 * put it back: for code that may reach a cancellation point (a write) with
 * an allocator lock held. Neither is a cancellation point itself. */
int tes_os_cancel_off(void);
void tes_os_cancel_restore(int state);
/* Write a message to stderr without allocating; if fd 2 is closed by then,
 * to the copy tes_os_keep_stderr made. */
void tes_os_write_stderr(const char *text, size_t length);
/* Keep a close-on-exec copy of fd 2 (one descriptor, taken only when an exit
 * report is asked for): many programs close stderr before the exit hooks run. */
void tes_os_keep_stderr(void);
/* getenv that never allocates (reads environ); NULL in secure execution. */
const char *tes_os_getenv(const char *name);
/* The environment to read TESSERA_* variables from: environ, or NULL in
 * secure execution (AT_SECURE). */
char *const *tes_os_environ(void);
/* The value in an environment entry "NAME=value" when NAME is name, else
 * NULL (no strlen/strncmp: no lazy binding of either at start-up). */
const char *tes_os_env_value(const char *entry, const char *name);
/* Random bits from the kernel (getrandom), or a clock/address mix. */
uint64_t tes_os_random_seed(void);
/* Raise SIGABRT. */
_Noreturn void tes_os_abort(void);

/* OS traffic counters, read by stats.c. */
typedef struct tes_os_counters_s {
  uint64_t mmap_calls, munmap_calls, madvise_calls, mremap_calls;
  uint64_t mmap_bytes, munmap_bytes, purged_bytes;
  uint64_t aligned_hint_hits; /* tes_os_map_aligned calls mapped at the hint, no trim */
  uint64_t aligned_trims;     /* munmaps trimming an over-sized aligned mapping */
  int64_t reserved, reserved_peak;   /* bytes mapped now / at most */
  int64_t committed, committed_peak; /* mapped minus purged, now / at most */
} tes_os_counters_t;
void tes_os_counters(tes_os_counters_t *out);
/* Adjust the committed gauge when purged memory is touched again. */
void tes_os_commit_note(int64_t delta);

#endif
