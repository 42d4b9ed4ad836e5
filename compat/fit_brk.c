/* fit_brk.c — the only file that calls sbrk. Owns the lock around growing
 * the program break and the count of bytes obtained (get_data_segment_size).
 *
 * The break is shared with the C library (stdio buffers, locale data, glibc's
 * own malloc) and, for ts_malloc_nolock, with the other thread heaps. So we
 * never assume that two sbrk calls return adjacent memory: an arena extends
 * its newest run only when the break still sits exactly at that run's end,
 * and otherwise starts a new run (a fit_run_t record, then one free block).
 * Even then another thread of the C library can move the break between our
 * sbrk(0) and sbrk(n); the result of sbrk(n) is what counts, and memory that
 * arrives somewhere unexpected becomes a run of its own. We never shrink the
 * break: memory above ours may belong to someone else, and the assignment
 * defines the data segment size as what was obtained.
 *
 * New memory is prefaulted (madvise MADV_POPULATE_WRITE, one call per sbrk
 * of at most FIT_PREFAULT_MAX bytes) unless TESSERA_FIT_PREFAULT=0: block
 * headers land all over a fresh region (every split writes one), and taking
 * those page faults one by one cost the large-range workload more than half
 * of its time; in one batch the kernel does the same work about twice as
 * fast. The price is that the data segment is resident, which it is anyway
 * once a program writes its blocks; a larger growth (one large request) is
 * not prefaulted, since its block need not be written whole.
 * Kernels without MADV_POPULATE_WRITE (before 5.14) ignore the advice.
 *
 * Called by fit_arena_malloc (fit_arena.c) with the arena owned by the
 * calling thread (or under the arena's lock for ts_malloc_lock).
 */
#include "fit_index.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static pthread_mutex_t fit_brk_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned long fit_segment_bytes;
_Atomic uintptr_t fit_brk_lo = UINTPTR_MAX, fit_brk_units; /* nothing is ours before the first sbrk */

/* Under fit_brk_lock, after sbrk gave [got, got+len). */
static void fit_note_span(char *got, size_t len) {
  uintptr_t lo = atomic_load_explicit(&fit_brk_lo, memory_order_relaxed);
  uintptr_t start = (uintptr_t)got & ~(uintptr_t)(FIT_ALIGN - 1);
  if (start < lo) {
    uintptr_t units = atomic_load_explicit(&fit_brk_units, memory_order_relaxed);
    uintptr_t hi = lo == UINTPTR_MAX ? 0 : lo + units * FIT_ALIGN;
    lo = start;
    atomic_store_explicit(&fit_brk_lo, lo, memory_order_relaxed);
    if (hi > lo) atomic_store_explicit(&fit_brk_units, (hi - lo) / FIT_ALIGN, memory_order_release);
  }
  uintptr_t units = ((uintptr_t)got + len - lo) / FIT_ALIGN;
  if (units > atomic_load_explicit(&fit_brk_units, memory_order_relaxed))
    atomic_store_explicit(&fit_brk_units, units, memory_order_release);
}

void fit_brk_fork_prepare(void) { pthread_mutex_lock(&fit_brk_lock); }
void fit_brk_fork_parent(void) { pthread_mutex_unlock(&fit_brk_lock); }
/* The child has one thread, the one that forked, and it holds the lock. */
void fit_brk_fork_child(void) { pthread_mutex_init(&fit_brk_lock, NULL); }

unsigned long fit_brk_segment_bytes(void) {
  return atomic_load_explicit(&fit_segment_bytes, memory_order_relaxed);
}

/* TESSERA_FIT_PREFAULT=0 turns prefaulting off; read once, without allocating. */
static int fit_prefault_enabled(void) {
  static atomic_int choice; /* 0 = not read yet, 1 = off, 2 = on */
  int v = atomic_load_explicit(&choice, memory_order_relaxed);
  if (v == 0) {
    const char *e = getenv("TESSERA_FIT_PREFAULT");
    v = (e && strcmp(e, "0") == 0) ? 1 : 2;
    if (e && v == 2 && strcmp(e, "1") != 0 && *e) fit_warn_env("TESSERA_FIT_PREFAULT", e, "0 or 1; prefaulting");
    atomic_store_explicit(&choice, v, memory_order_relaxed);
  }
  return v == 2;
}

/* Growths up to this are prefaulted. The break grows by one block at a time
 * (the request, or what the free top block lacks), so a larger growth is a
 * large request: its pages fault in as the program writes them, as glibc's
 * mmap'ed chunks do. Prefaulting it made the whole block resident before a
 * byte was written (bf_malloc(256 MiB): 256 MiB of RAM at once), and a
 * request of most of the RAM woke the OOM killer instead of failing. */
#define FIT_PREFAULT_MAX ((size_t)4 << 20)

/* Prefaults the whole pages of [got, got+len) that no one has touched yet
 * (the page holding `got` may already be in use, by us or by the C library). */
static void fit_prefault(char *got, size_t len) {
  const uintptr_t page = 4096;
  uintptr_t lo = ((uintptr_t)got + page - 1) & ~(page - 1);
  uintptr_t hi = ((uintptr_t)got + len + page - 1) & ~(page - 1);
  if (hi > lo && len <= FIT_PREFAULT_MAX && fit_prefault_enabled())
    (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}

/* Turns [got, got+len) into a new run of the arena holding one free block
 * (counted in free_bytes, not indexed). NULL when the piece is too small to
 * hold a run record and a block; its bytes stay counted but unused. */
static fit_block_t *fit_start_run(fit_arena_t *a, char *got, size_t len) {
  char *end = got + len;
  char *start = (char *)(((uintptr_t)got + FIT_ALIGN - 1) & ~(uintptr_t)(FIT_ALIGN - 1));
  if (end < start || (size_t)(end - start) < sizeof(fit_run_t) + FIT_MIN_BLOCK) return NULL;
  size_t size = ((size_t)(end - start) - sizeof(fit_run_t)) & ~(size_t)(FIT_ALIGN - 1);
  if (size > FIT_MAX_BLOCK) size = FIT_MAX_BLOCK & ~(size_t)(FIT_ALIGN - 1);
  fit_run_t *run = (fit_run_t *)start;
  run->next = a->runs;
  run->reserved = 0;
  a->runs = run;
  fit_block_t *b = (fit_block_t *)(start + sizeof(fit_run_t));
  b->prev_units = 0;
  b->owner = (uint16_t)a->id;
  b->prev_free = 0;
  b->remote_freed = 0;
  fit_set_size(b, size, FIT_FREE | FIT_LAST);
  a->top_last = b;
  a->top_end = (char *)b + size;
  fit_add_free_bytes(a, (long)size);
  return b;
}

fit_block_t *fit_brk_grow(fit_arena_t *a, size_t need) {
  pthread_mutex_lock(&fit_brk_lock);
  for (;;) {
    char *brk_now = sbrk(0);
    if (brk_now == (char *)-1) break;
    fit_block_t *last = a->top_last;
    int extend = a->top_end != NULL && a->top_end == brk_now;
    size_t have = 0, ask;
    if (extend) {
      have = fit_is_free(last) ? fit_size(last) : 0;
      if (have >= need) { /* only after a stray run was indexed below */
        fit_index_remove(a, last);
        pthread_mutex_unlock(&fit_brk_lock);
        return last;
      }
      ask = need - have;
      if (have + ask > FIT_MAX_BLOCK) break;
    } else {
      size_t pad = (size_t)(-(uintptr_t)brk_now) & (FIT_ALIGN - 1);
      ask = pad + sizeof(fit_run_t) + need;
    }
    if (ask > (size_t)INTPTR_MAX) break;
    char *got = sbrk((intptr_t)ask);
    if (got == (char *)-1) break;
    atomic_fetch_add_explicit(&fit_segment_bytes, ask, memory_order_relaxed);
    fit_note_span(got, ask);
    fit_prefault(got, ask);

    if (got != brk_now) {
      /* Someone moved the break between our two calls: the memory is ours
       * but not where we planned. Make it a run of its own and retry. */
      fit_block_t *b = fit_start_run(a, got, ask);
      if (b && fit_size(b) >= need) {
        pthread_mutex_unlock(&fit_brk_lock);
        return b;
      }
      if (b) fit_index_insert(a, b);
      continue;
    }
    fit_block_t *b;
    if (extend && have) {
      /* The run ends with a free block: grow it instead of adding one. */
      fit_index_remove(a, last);
      fit_set_size(last, have + ask, FIT_FREE | FIT_LAST);
      fit_add_free_bytes(a, (long)ask);
      b = last;
    } else if (extend) {
      b = (fit_block_t *)brk_now;
      b->prev_units = (uint32_t)(fit_size(last) / FIT_ALIGN);
      b->owner = (uint16_t)a->id;
      b->prev_free = 0; /* last is in use, or it would have been grown */
      b->remote_freed = 0;
      fit_set_size(b, ask, FIT_FREE | FIT_LAST);
      /* last is allocated, and another thread may be freeing it right now:
       * ts_free_nolock's remote path reads its size word (for the FREE
       * flag, fit_push_remote), so this one write to an allocated block's
       * size word is atomic. */
      __atomic_store_n(&last->size_flags, last->size_flags & ~FIT_LAST, __ATOMIC_RELAXED);
      a->top_last = b;
      fit_add_free_bytes(a, (long)ask);
    } else {
      b = fit_start_run(a, got, ask); /* cannot fail: ask covers record + need */
    }
    a->top_end = got + ask;
    pthread_mutex_unlock(&fit_brk_lock);
    return b;
  }
  pthread_mutex_unlock(&fit_brk_lock);
  errno = ENOMEM;
  return NULL;
}
