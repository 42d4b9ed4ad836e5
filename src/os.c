/* os.c — the only file that talks to the kernel (see os.h for the contract).
 *
 * Owns: mmap/munmap/mremap/madvise/mprotect, the clock, the thread id,
 * stderr output and environment lookup, plus the OS traffic counters and the
 * test-only fault-injection hook. Counters are relaxed atomics: every caller
 * is already on a slow path next to a system call, so they cost nothing
 * measurable. Nothing here allocates. */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef TES_FAULT_INJECTION
#include "fault.h"
#endif

extern char **environ;

static size_t os_page_size = 4096;

extern char __libc_single_threaded __attribute__((weak)); /* a libc without it: never single-threaded */
static const char os_threaded = 0;
const char *tes_single_threaded_flag = &os_threaded; /* os.h; one load, no GOT entry to test */

static _Atomic uint64_t os_mmap_calls, os_munmap_calls, os_madvise_calls, os_mremap_calls;
static _Atomic uint64_t os_mmap_bytes, os_munmap_bytes, os_purged_bytes;
static _Atomic int64_t os_reserved, os_reserved_peak, os_committed, os_committed_peak;

#define RELAXED memory_order_relaxed

static void gauge_add(_Atomic int64_t *gauge, _Atomic int64_t *peak, int64_t delta) {
  if (delta == 0) return; /* a locked add is a full barrier, even of 0 */
  int64_t now = (int64_t)tes_rmw_fetch_add64((_Atomic uint64_t *)gauge, (uint64_t)delta) + delta;
  int64_t old = atomic_load_explicit(peak, RELAXED);
  while (now > old && !atomic_compare_exchange_weak_explicit(peak, &old, now, RELAXED, RELAXED)) {
  }
}

/* ---- fault injection (test builds only) --------------------------------- */
#ifdef TES_FAULT_INJECTION
static _Atomic long fault_nth[TES_FAULT_SITE_COUNT];       /* 0 = off, else calls left */
static _Atomic size_t fault_above[TES_FAULT_SITE_COUNT];   /* 0 = off */
static _Atomic bool fault_always[TES_FAULT_SITE_COUNT];
static _Atomic uint64_t fault_count;

void tes_fault_fail_nth(tes_fault_site_t site, long n) {
  if ((unsigned)site < TES_FAULT_SITE_COUNT) atomic_store(&fault_nth[site], n > 0 ? n : 0);
}
void tes_fault_fail_above(tes_fault_site_t site, size_t bytes) {
  if ((unsigned)site < TES_FAULT_SITE_COUNT) atomic_store(&fault_above[site], bytes);
}
void tes_fault_fail_always(tes_fault_site_t site, bool on) {
  if ((unsigned)site < TES_FAULT_SITE_COUNT) atomic_store(&fault_always[site], on);
}
void tes_fault_clear(void) {
  for (int i = 0; i < TES_FAULT_SITE_COUNT; i++) {
    atomic_store(&fault_nth[i], 0);
    atomic_store(&fault_above[i], 0);
    atomic_store(&fault_always[i], false);
  }
}
uint64_t tes_fault_injected(void) { return atomic_load(&fault_count); }

/* True when this call at `site` for `bytes` must fail. */
static bool fault_fires(tes_fault_site_t site, size_t bytes) {
  bool fire = atomic_load_explicit(&fault_always[site], RELAXED);
  size_t above = atomic_load_explicit(&fault_above[site], RELAXED);
  if (above != 0 && bytes > above) fire = true;
  long n = atomic_load_explicit(&fault_nth[site], RELAXED);
  while (n > 0) {
    if (atomic_compare_exchange_weak(&fault_nth[site], &n, n - 1)) {
      if (n == 1) fire = true;
      break;
    }
  }
  if (fire) atomic_fetch_add(&fault_count, 1);
  return fire;
}
#define FAULT(site, bytes) fault_fires(site, bytes)

/* Memory system calls made while the calling thread held a process-wide
 * allocator lock (tes_global_lock_mine, heap.c): every other thread that
 * wants that lock spins, then yields, for the length of the call. */
static _Atomic uint64_t locked_syscalls;
uint64_t tes_fault_locked_syscalls(void) { return atomic_load(&locked_syscalls); }
#define LOCK_WATCH() \
  ((void)(tes_global_lock_mine() && atomic_fetch_add_explicit(&locked_syscalls, 1, RELAXED)))
#else
#define FAULT(site, bytes) false
#define LOCK_WATCH() ((void)0)
#endif

/* ---- memory ------------------------------------------------------------- */
/* The page size from the auxiliary vector (getauxval, which start-up already
 * needs for AT_SECURE): sysconf's jump table made the start-up of every
 * program touch a 64 KiB window of libc's read-only data that nothing else
 * reads (PERFORMANCE.md, twenty-first session). */
void tes_os_init(void) {
  long ps = (long)getauxval(AT_PAGESZ);
  if (ps <= 0) ps = sysconf(_SC_PAGESIZE);
  if (ps > 0 && (ps & (ps - 1)) == 0) os_page_size = (size_t)ps;
  if (&__libc_single_threaded != NULL) tes_single_threaded_flag = &__libc_single_threaded;
}

size_t tes_os_page_size(void) { return os_page_size; }

/* Read-write mappings are made without MAP_NORESERVE, as glibc's are, so
 * that the kernel's overcommit heuristic (vm.overcommit_memory=0) refuses a
 * request larger than RAM and swap together: with the flag, malloc(2^44)
 * succeeded on a 24 GB machine and Python's bytearray(2**44) started zeroing
 * 16 TiB instead of raising MemoryError. Inaccessible reservations (remap
 * staging, PROT_NONE) are never charged, flag or not. */
static void *raw_mmap(void *hint, size_t size, int prot) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (prot == PROT_NONE ? MAP_NORESERVE : 0);
  void *p = mmap(hint, size, prot, flags, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* errno as it was: free() unmaps (a large block, a segment the cache does
 * not keep) and must not change errno (POSIX.1-2024, glibc >= 2.33), and
 * munmap can fail: ENOMEM when the unmap would split a mapping past
 * vm.max_map_count (the range then simply stays mapped). */
static void raw_munmap(void *addr, size_t size) {
  if (size == 0) return;
  int saved = errno;
  munmap(addr, size);
  errno = saved;
  atomic_fetch_add_explicit(&os_munmap_calls, 1, RELAXED);
}

/* size bytes at exactly addr, or NULL when any of that range is taken (the
 * kernel refuses rather than replaces) or the kernel refuses the address. */
static void *map_fixed_noreplace(uintptr_t addr, size_t size) {
  void *q = mmap((void *)addr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (q == (void *)addr) return q;
  if (q != MAP_FAILED) munmap(q, size); /* a kernel before 4.17 took it as a hint */
  return NULL;
}

/* The over-sized mapping failed: with RLIMIT_AS close to what is mapped, the
 * `alignment` extra bytes may be what does not fit (the smallest limit under
 * which `python3 -c pass` ran was 67 MB with libtessera, 13 MB with glibc).
 * Map exactly `size` where the kernel likes, then at the aligned addresses
 * around it. */
static void *map_aligned_exactly(size_t size, size_t alignment) {
  uint8_t *p = raw_mmap(NULL, size, PROT_READ | PROT_WRITE);
  if (p == NULL || ((uintptr_t)p & (alignment - 1)) == 0) return p;
  munmap(p, size);
  uintptr_t down = (uintptr_t)p & ~(uintptr_t)(alignment - 1);
  uintptr_t tries[4] = {down + alignment, down, down + 2 * alignment, down - alignment};
  for (int i = 0; i < 4; i++) {
    void *q = map_fixed_noreplace(tries[i], size);
    if (q != NULL) return q;
  }
  return NULL;
}

/* Where the last aligned mapping starts (0: none yet): the next one is tried
 * first at the range of its own size and alignment just below it. Linux places mappings top-down and the head
 * trimmed off below an over-mapped segment is free, so that range is usually
 * free: one mmap instead of an mmap and two trimming munmaps (footprint's
 * large phase made 125 trims). A range taken since (another mapping, another
 * thread's segment) only costs the refused call, then the over-map. */
static _Atomic uintptr_t os_last_aligned;
static _Atomic uint64_t os_aligned_hint_hits, os_aligned_trims;

void *tes_os_map_aligned(size_t size, size_t alignment) {
  LOCK_WATCH();
  if (alignment < os_page_size) alignment = os_page_size;
  if (size == 0 || size > ((size_t)1 << 46) || alignment > ((size_t)1 << 40) || FAULT(TES_FAULT_MMAP, size)) {
    errno = ENOMEM;
    return NULL;
  }
  atomic_fetch_add_explicit(&os_mmap_calls, 1, RELAXED);
  int saved = errno; /* a try that failed must not show through a malloc that succeeded */
  uintptr_t start = 0, last = alignment > os_page_size ? atomic_load_explicit(&os_last_aligned, RELAXED) : 0;
  /* The hint in this call's alignment (a memalign of 8 MiB after 4 MiB
   * segments must not take a range only 4 MiB aligned). */
  uintptr_t hint = last > size + alignment ? (last - size) & ~(uintptr_t)(alignment - 1) : 0;
  if (hint != 0 && (start = (uintptr_t)map_fixed_noreplace(hint, size)) != 0)
    atomic_fetch_add_explicit(&os_aligned_hint_hits, 1, RELAXED);
  /* Else over-map by the alignment and trim both ends: three calls. */
  size_t span = size + alignment - os_page_size;
  uint8_t *p = start != 0 ? NULL : raw_mmap(NULL, span, PROT_READ | PROT_WRITE);
  if (p != NULL) {
    start = ((uintptr_t)p + alignment - 1) & ~(uintptr_t)(alignment - 1);
    size_t head = start - (uintptr_t)p;
    size_t tail = span - head - size;
    if (head) munmap(p, head);
    if (tail) munmap((uint8_t *)start + size, tail);
    atomic_fetch_add_explicit(&os_aligned_trims, (head != 0) + (tail != 0), RELAXED);
  } else if (start == 0 && (start = (uintptr_t)map_aligned_exactly(size, alignment)) == 0) {
    errno = ENOMEM;
    return NULL;
  }
  if (alignment > os_page_size) {
    atomic_store_explicit(&os_last_aligned, start, RELAXED);
  } else if (atomic_load_explicit(&os_last_aligned, RELAXED) == 0) {
    /* No aligned mapping yet: this one, placed by the kernel below the
     * loaded libraries, is where the first segment is tried. A process's
     * first malloc maps its heap struct (a page-aligned chunk, heap.c) just
     * before its first segment, which then takes one mmap at the hint
     * instead of an over-map and two trims (PERFORMANCE.md, twenty-sixth
     * session, start26). A race with another first mapping only moves a
     * hint. */
    uintptr_t none = 0;
    atomic_compare_exchange_strong_explicit(&os_last_aligned, &none, start, RELAXED, RELAXED);
  }
  atomic_fetch_add_explicit(&os_mmap_bytes, size, RELAXED);
  gauge_add(&os_reserved, &os_reserved_peak, (int64_t)size);
  gauge_add(&os_committed, &os_committed_peak, (int64_t)size);
  errno = saved;
  return (void *)start;
}

void tes_os_unmap(void *addr, size_t size) {
  LOCK_WATCH();
  raw_munmap(addr, size);
  atomic_fetch_add_explicit(&os_munmap_bytes, size, RELAXED);
  gauge_add(&os_reserved, &os_reserved_peak, -(int64_t)size);
}

size_t tes_os_resident_pages(void *addr, size_t size) {
  LOCK_WATCH();
  unsigned char vec[1024]; /* one byte a page: 4 MiB a call, no allocation */
  size_t pages = size / os_page_size, count = 0;
  int saved = errno;
  for (size_t done = 0; done < pages;) {
    size_t n = pages - done < sizeof vec ? pages - done : sizeof vec;
    if (mincore((uint8_t *)addr + done * os_page_size, n * os_page_size, vec) != 0) {
      errno = saved;
      return SIZE_MAX;
    }
    /* Eight bytes at a time: their low bits, summed by the multiply into
     * the top byte (eight at most), a fifth of a byte loop's instructions
     * (large.c probes a tail of up to 1,024 pages). */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t word;
      memcpy(&word, vec + i, sizeof word);
      count += ((word & 0x0101010101010101u) * 0x0101010101010101u) >> 56;
    }
    for (; i < n; i++) count += vec[i] & 1;
    done += n;
  }
  errno = saved;
  return count;
}

bool tes_os_purge(void *addr, size_t size, bool decommit) {
  LOCK_WATCH();
  if (size == 0) return true;
  atomic_fetch_add_explicit(&os_madvise_calls, 1, RELAXED);
  if (FAULT(TES_FAULT_MADVISE, size)) return false;
  int advice = decommit ? MADV_DONTNEED : MADV_FREE;
  int saved = errno;
  bool done = madvise(addr, size, advice) == 0;
  if (!done && advice == MADV_FREE && madvise(addr, size, MADV_DONTNEED) == 0) advice = MADV_DONTNEED, done = true;
  errno = saved;
  if (!done) return false;
  atomic_fetch_add_explicit(&os_purged_bytes, size, RELAXED);
  return advice == MADV_DONTNEED;
}

void tes_os_commit_note(int64_t delta) { gauge_add(&os_committed, &os_committed_peak, delta); }

static bool set_protection(void *addr, size_t size, int prot) {
  LOCK_WATCH();
  int saved = errno;
  bool done = mprotect(addr, size, prot) == 0;
  errno = saved;
  return done;
}
bool tes_os_protect(void *addr, size_t size) { return set_protection(addr, size, PROT_NONE); }
bool tes_os_unprotect(void *addr, size_t size) { return set_protection(addr, size, PROT_READ | PROT_WRITE); }

void tes_os_huge_pages(void *addr, size_t size, bool enable) {
  LOCK_WATCH();
  atomic_fetch_add_explicit(&os_madvise_calls, 1, RELAXED);
  int saved = errno; /* EINVAL without THP in the kernel: advisory, nobody's error */
  madvise(addr, size, enable ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  errno = saved;
}

void *tes_os_remap(void *addr, size_t old_size, size_t new_size, size_t alignment) {
  LOCK_WATCH();
  if (alignment < os_page_size) alignment = os_page_size;
  if (new_size > ((size_t)1 << 46) || FAULT(TES_FAULT_MREMAP, new_size)) return NULL;
  atomic_fetch_add_explicit(&os_mremap_calls, 1, RELAXED);
  /* errno as it was, whatever happens: the in-place try fails (ENOMEM)
   * whenever the block has to move, and a failure here is not the call's
   * (realloc then copies the block, and malloc says ENOMEM if that fails). */
  int saved = errno;
  /* First try to resize where it is (always works for shrinking). */
  void *p = mremap(addr, old_size, new_size, 0);
  if (p == MAP_FAILED) {
    /* Move the page tables to a fresh aligned range: no copying. */
    size_t span = new_size + alignment - os_page_size;
    uint8_t *area = raw_mmap(NULL, span, PROT_NONE);
    if (area == NULL) {
      errno = saved;
      return NULL;
    }
    uintptr_t start = ((uintptr_t)area + alignment - 1) & ~(uintptr_t)(alignment - 1);
    size_t head = start - (uintptr_t)area, tail = span - head - new_size;
    if (head) munmap(area, head);
    if (tail) munmap((uint8_t *)start + new_size, tail);
    p = mremap(addr, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)start);
    if (p == MAP_FAILED) {
      munmap((void *)start, new_size);
      errno = saved;
      return NULL;
    }
  }
  int64_t delta = (int64_t)new_size - (int64_t)old_size;
  gauge_add(&os_reserved, &os_reserved_peak, delta);
  gauge_add(&os_committed, &os_committed_peak, delta);
  errno = saved;
  return p;
}

/* The guards of a mapping grown from old_size to new_size at base: its new
 * last page when `tail` (one page, else 0), and the page at guard_at (0:
 * none); everything else the growth added stays read-write. */
static bool guards_protect(uint8_t *base, size_t new_size, size_t tail, size_t guard_at) {
  size_t ps = os_page_size;
  return (tail == 0 || mprotect(base + new_size - tail, tail, PROT_NONE) == 0) &&
         (guard_at == 0 || mprotect(base + guard_at, ps, PROT_NONE) == 0);
}

/* A remap that failed half-way could not be undone: a segment with a hole
 * or an unguarded tail is worse than stopping (never seen: the calls that
 * undo need no memory the ones before did not already free). */
static _Noreturn void remap_undo_failed(void) {
  static const char text[] = "tessera: fatal: cannot restore a large block's mapping after a failed mremap\n";
  tes_os_write_stderr(text, sizeof text - 1);
  tes_os_abort();
}

void *tes_os_remap_guarded(void *addr, size_t old_size, size_t new_size, size_t alignment, const size_t *cuts,
                           size_t count, bool tail_guard, size_t guard_at) {
  LOCK_WATCH();
  size_t ps = os_page_size;
  if (alignment < ps) alignment = ps;
  if (new_size <= old_size || new_size > ((size_t)1 << 46) || count == 0 || cuts[0] != 0) return NULL;
  atomic_fetch_add_explicit(&os_mremap_calls, 1, RELAXED);
  int saved = errno; /* as tes_os_remap: the in-place try fails whenever the mapping must move */
  uint8_t *base = addr, *dst = base;
  size_t tail = tail_guard ? ps : 0, body = cuts[count - 1];
  size_t delta = new_size - old_size;
  /* In place: the tail guard goes back to read-write, which joins it to
   * the body's piece again (mprotect had split it off; the same protection
   * merges them), and the body grows into the free addresses after the
   * mapping; then the new last page and the page at guard_at become
   * guards. The growth is read-write from the start, as in the move
   * below, and nothing made PROT_NONE has to be turned read-write. */
  if (!FAULT(TES_FAULT_MREMAP, new_size)) {
    if (tail == 0 || mprotect(base + old_size - tail, tail, PROT_READ | PROT_WRITE) == 0) {
      if (mremap(base + body, old_size - body, new_size - body, 0) != MAP_FAILED) {
        if (guards_protect(base, new_size, tail, guard_at)) goto done;
        munmap(base + old_size, delta); /* back as it was */
      }
      if (tail && mprotect(base + old_size - tail, tail, PROT_NONE) != 0) remap_undo_failed();
    }
  }
  if (FAULT(TES_FAULT_MREMAP, new_size)) goto fail;
  /* Moving: each piece to its offset in a fresh aligned range, the body
   * first (nothing else has moved if the kernel refuses it). The range is
   * mapped read-write, as the segment was, so what the body does not cover
   * is the block's new, zeroed part already and merges with the body's
   * mapping (same flags, no pages yet); the new guards are then split off
   * it. (Growing the body in the move itself, into a PROT_NONE range, left
   * the new part unaddressable to valgrind's memcheck: sanitize.defer.) */
  size_t span = new_size + alignment - ps;
  uint8_t *area = raw_mmap(NULL, span, PROT_READ | PROT_WRITE);
  if (area == NULL) goto fail;
  dst = (uint8_t *)(((uintptr_t)area + alignment - 1) & ~(uintptr_t)(alignment - 1));
  size_t head = (size_t)(dst - area), rest = span - head - new_size;
  if (head) munmap(area, head);
  if (rest) munmap(dst + new_size, rest);
  size_t body_old = old_size - tail - body;
  if (mremap(base + body, body_old, body_old, MREMAP_MAYMOVE | MREMAP_FIXED, dst + body) == MAP_FAILED) {
    munmap(dst, new_size);
    goto fail;
  }
  size_t lowest = count - 1; /* pieces lowest... are at dst */
  bool ok = guards_protect(dst, new_size, tail, guard_at);
  while (ok && lowest > 0) {
    size_t i = lowest - 1, len = cuts[i + 1] - cuts[i];
    ok = !FAULT(TES_FAULT_MREMAP, new_size) &&
         mremap(base + cuts[i], len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst + cuts[i]) != MAP_FAILED;
    if (ok) lowest = i;
  }
  if (!ok) {
    /* Each piece that moved goes back; the rest of the new range (the
     * block's new part and its guards) goes with the unmap below. */
    for (size_t i = lowest; i < count; i++) {
      size_t len = i + 1 < count ? cuts[i + 1] - cuts[i] : body_old;
      if (mremap(dst + cuts[i], len, len, MREMAP_MAYMOVE | MREMAP_FIXED, base + cuts[i]) == MAP_FAILED)
        remap_undo_failed();
    }
    munmap(dst, new_size);
    goto fail;
  }
  if (tail) munmap(base + old_size - tail, tail); /* the old tail guard: the rest has moved */
done:
  gauge_add(&os_reserved, &os_reserved_peak, (int64_t)delta);
  gauge_add(&os_committed, &os_committed_peak, (int64_t)delta);
  errno = saved;
  return dst;
fail:
  errno = saved;
  return NULL;
}

/* ---- time, threads, output ---------------------------------------------- */
/* The coarse clock: it only reads the time of the last timer tick (1-4 ms
 * old), which is all purge delays of tens of milliseconds need, and it
 * costs 17 ns instead of 90 ns on this VM's CLOCK_MONOTONIC (pvclock/TSC
 * read): with two reads per large malloc/free pair (segment cache expiry and
 * due check), CLOCK_MONOTONIC was 10% of the `mixed` workload's time. */
int64_t tes_os_clock_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long tes_os_thread_id(void) { return (long)syscall(SYS_gettid); }

/* /proc/self/stat into text, NUL-terminated; false if it cannot be read.
 * Raw system calls: open, read and close are cancellation points, and the
 * reaper asks (tes_os_thread_alive) with late_lock held. A thread with a
 * deferred cancel pending that reaped (malloc_trim, its first malloc) was
 * unwound there with the lock taken, and every later reap, malloc_trim and
 * fork spun on it for ever. */
static bool read_self_stat(char *text, size_t size) {
  long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  long n = syscall(SYS_read, fd, text, size - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return false;
  text[n] = '\0';
  return true;
}

/* The main thread's state in /proc/self/stat is Z once it has exited while
 * other threads run (pthread_exit from main): its task stays a zombie, and
 * signals, tgkill's probe among them, still reach it, until the process
 * ends. */
static bool main_thread_exited(void) {
  char text[512];
  if (!read_self_stat(text, sizeof text)) return false;
  const char *p = strrchr(text, ')'); /* comm may hold blanks and parentheses */
  return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

bool tes_os_thread_alive(long tid) {
  int saved = errno;
  long pid = (long)getpid();
  bool alive = syscall(SYS_tgkill, pid, tid, 0) == 0 || errno != ESRCH;
  /* A main thread gone by pthread_exit answers tgkill as a living one. */
  if (alive && tid == pid) alive = !main_thread_exited();
  errno = saved;
  return alive;
}

void tes_os_yield(void) { sched_yield(); }

long tes_os_thread_count(void) {
  char text[1024];
  if (!read_self_stat(text, sizeof text)) return -1;
  /* pid (comm) state ppid ...: comm may hold blanks and parentheses, so count
   * fields from the last ')'. The state (field 3) is the main thread's; Z
   * when it has exited while others run. num_threads is field 20. */
  const char *p = strrchr(text, ')');
  if (p == NULL || p[1] != ' ') return -1;
  bool main_gone = p[2] == 'Z';
  for (int field = 2; field < 20; field++) {
    p = strchr(p + 1, ' ');
    if (p == NULL) return -1;
  }
  long count = 0;
  for (p++; *p >= '0' && *p <= '9'; p++) count = count * 10 + (*p - '0');
  return main_gone ? count - 1 : count;
}

void tes_os_wait(int *word, int expected, int64_t ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
  int saved = errno;
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, ms < 0 ? NULL : &ts, NULL, 0);
  errno = saved;
}

void tes_os_wake(int *word) {
  int saved = errno;
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  errno = saved;
}

bool tes_os_thread_start(void *(*fn)(void *), const char *name) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* inherited by the new thread */
  pthread_t thread;
  int saved = errno;
  bool started = pthread_create(&thread, &attr, fn, NULL) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (started) pthread_setname_np(thread, name);
  errno = saved;
  return started;
}

int tes_os_cancel_off(void) {
  int state = PTHREAD_CANCEL_ENABLE;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
  return state;
}

void tes_os_cancel_restore(int state) { pthread_setcancelstate(state, NULL); }

/* The raw system call, not write(): write is a cancellation point, and a
 * message can be written with a lock held (an out-of-memory note under a
 * heap's purge lock); a pending deferred cancel acting there left the lock
 * taken, and the thread's own exit, or a fork, spun on it for ever. */
static int kept_stderr = -1;
/* The file the copy was made of: a program may close every descriptor from
 * 3 up (closefrom, as daemons and shells do) and open a file that takes the
 * copy's number; the exit report must not go into that file (review,
 * twenty-sixth session, mrg26: lib.api_options' --child-reuses-kept). */
static dev_t kept_stderr_dev;
static ino_t kept_stderr_ino;

void tes_os_keep_stderr(void) {
  if (kept_stderr >= 0) return;
  struct stat st;
  int fd = (int)syscall(SYS_fcntl, 2, F_DUPFD_CLOEXEC, 3);
  if (fd >= 0 && fstat(fd, &st) == 0) {
    kept_stderr_dev = st.st_dev;
    kept_stderr_ino = st.st_ino;
    kept_stderr = fd;
  } else if (fd >= 0) {
    syscall(SYS_close, fd);
  }
}

/* The copy, if it still names the file it was made of. */
static bool kept_stderr_same(void) {
  struct stat st;
  return fstat(kept_stderr, &st) == 0 && st.st_dev == kept_stderr_dev && st.st_ino == kept_stderr_ino;
}

void tes_os_write_stderr(const char *text, size_t length) {
  int fd = 2;
  while (length > 0) {
    ssize_t n = (ssize_t)syscall(SYS_write, fd, text, length);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      /* The program closed stderr (coreutils' close_stdout at exit does):
       * the exit statistics go where stderr pointed at start-up. */
      if (n < 0 && errno == EBADF && fd == 2 && kept_stderr >= 0 && kept_stderr_same()) {
        fd = kept_stderr;
        continue;
      }
      return;
    }
    text += n;
    length -= (size_t)n;
  }
}

/* In secure-execution mode (a setuid or setgid program, or one with file
 * capabilities: AT_SECURE) the environment belongs to a less privileged
 * caller: no TESSERA_* variable is read, as glibc ignores its malloc
 * tunables there. Otherwise a caller could turn the hardened build's abort
 * on a detected heap error off, or have heap statistics printed. */
char *const *tes_os_environ(void) {
  if (environ == NULL || getauxval(AT_SECURE) != 0) return NULL;
  return environ;
}

const char *tes_os_env_value(const char *entry, const char *name) {
  while (*name != '\0' && *entry == *name) entry++, name++;
  return *name == '\0' && *entry == '=' ? entry + 1 : NULL;
}

const char *tes_os_getenv(const char *name) {
  char *const *env = tes_os_environ();
  for (; env != NULL && *env != NULL; env++) {
    const char *value = tes_os_env_value(*env, name);
    if (value != NULL) return value;
  }
  return NULL;
}

uint64_t tes_os_random_seed(void) {
  uint64_t seed = 0;
  int saved = errno;
  long got = syscall(SYS_getrandom, &seed, sizeof seed, 1 /* GRND_NONBLOCK */);
  errno = saved;
  if (got != (long)sizeof seed) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&seed ^ (uint64_t)getpid();
  }
  return seed;
}

_Noreturn void tes_os_abort(void) {
  /* abort() may flush stdio (and so allocate); raise directly first. */
  signal(SIGABRT, SIG_DFL);
  raise(SIGABRT);
  _exit(134);
}

void tes_os_counters(tes_os_counters_t *out) {
  out->mmap_calls = atomic_load(&os_mmap_calls);
  out->munmap_calls = atomic_load(&os_munmap_calls);
  out->madvise_calls = atomic_load(&os_madvise_calls);
  out->mremap_calls = atomic_load(&os_mremap_calls);
  out->mmap_bytes = atomic_load(&os_mmap_bytes);
  out->munmap_bytes = atomic_load(&os_munmap_bytes);
  out->purged_bytes = atomic_load(&os_purged_bytes);
  out->aligned_hint_hits = atomic_load(&os_aligned_hint_hits);
  out->aligned_trims = atomic_load(&os_aligned_trims);
  out->reserved = atomic_load(&os_reserved);
  out->reserved_peak = atomic_load(&os_reserved_peak);
  out->committed = atomic_load(&os_committed);
  out->committed_peak = atomic_load(&os_committed_peak);
}
