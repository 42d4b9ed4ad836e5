/* memlib: simulated sbrk heap for the lab (see memlib.h for the contract). */
#include "memlib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char *heap_start;  /* first byte of the reserved region */
static char *heap_brk;    /* current break: first byte past the heap */
static size_t heap_cap;   /* bytes reserved */
static size_t sbrk_calls;
static char *guard_from;  /* mem_guard on: the first PROT_NONE byte (the break's page end); else NULL */

static char *page_end(char *p) {
  size_t page = mem_pagesize();
  return heap_start + (((size_t)(p - heap_start) + page - 1) & ~(page - 1));
}

int mem_init_cap(size_t cap) {
  mem_deinit();
  if (cap == 0) cap = MEM_DEFAULT_CAP;
  size_t page = mem_pagesize();
  cap = (cap + page - 1) & ~(page - 1);
  /* MAP_NORESERVE: the cap is an upper bound, not a commitment. */
  void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return -1;
  heap_start = heap_brk = p;
  heap_cap = cap;
  sbrk_calls = 0;
  return 0;
}

void mem_init(void) {
  if (mem_init_cap(MEM_DEFAULT_CAP) != 0) {
    perror("mem_init: cannot reserve the simulated heap");
    exit(1);
  }
}

void mem_deinit(void) {
  if (heap_start) munmap(heap_start, heap_cap);
  heap_start = heap_brk = guard_from = NULL;
  heap_cap = 0;
  sbrk_calls = 0;
}

void *mem_sbrk(intptr_t incr) {
  if (!heap_start || incr < 0 || (size_t)incr > heap_cap - (size_t)(heap_brk - heap_start)) {
    errno = ENOMEM;
    return (void *)-1;
  }
  char *old = heap_brk;
  if (guard_from && page_end(heap_brk + incr) > guard_from) {
    char *to = page_end(heap_brk + incr);
    if (mprotect(guard_from, (size_t)(to - guard_from), PROT_READ | PROT_WRITE) != 0) {
      errno = ENOMEM;
      return (void *)-1;
    }
    guard_from = to;
  }
  heap_brk += incr;
  sbrk_calls++;
  return old;
}

/* Guard mode: every page past the break's page is PROT_NONE, so a write past
 * the break (a footer or epilogue one word too far, a block that runs over
 * the heap's end) faults at once instead of landing in memory the next
 * mem_sbrk hands out. Within the break's own page it still goes unseen. An
 * mprotect per growth that crosses a page: the driver turns it on for its
 * checked pass only, never for a timed one. */
int mem_guard(int on) {
  if (!heap_start) return -1;
  if (on && !guard_from) {
    char *from = page_end(heap_brk);
    if (from < heap_start + heap_cap && mprotect(from, (size_t)(heap_start + heap_cap - from), PROT_NONE) != 0)
      return -1;
    guard_from = from;
  } else if (!on && guard_from) {
    if (guard_from < heap_start + heap_cap &&
        mprotect(guard_from, (size_t)(heap_start + heap_cap - guard_from), PROT_READ | PROT_WRITE) != 0)
      return -1;
    guard_from = NULL;
  }
  return 0;
}

/* Pages below this stay resident across resets (see mem_reset_brk). */
#define MEM_KEEP_RESIDENT ((size_t)256 << 20)

/* Zero [p, p + len) (p page-aligned) keeping its resident pages resident:
 * those are cleared with memset; a page that is not resident is already zero
 * unless it was swapped out, and MADV_DONTNEED makes it zero either way
 * without touching it. So a heap that is mostly untouched address space (the
 * multi-GiB blocks of the 64-bit traces, of which only tags and the driver's
 * windows are written) is not faulted in just to be zeroed. */
static void zero_keeping_resident(char *p, size_t len) {
  static unsigned char resident[4096];
  size_t page = mem_pagesize();
  size_t npages = (len + page - 1) / page;
  for (size_t first = 0; first < npages; first += sizeof resident) {
    size_t n = npages - first < sizeof resident ? npages - first : sizeof resident;
    char *chunk = p + first * page;
    size_t chunk_len = first + n == npages ? len - first * page : n * page;
    if (mincore(chunk, n * page, resident) != 0) {
      memset(chunk, 0, chunk_len); /* cannot tell: clear it all */
      continue;
    }
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j < n && (resident[j] & 1) == (resident[i] & 1)) j++;
      size_t off = i * page, end = j * page < chunk_len ? j * page : chunk_len;
      if (resident[i] & 1) memset(chunk + off, 0, end - off);
      else madvise(chunk + off, end - off, MADV_DONTNEED);
      i = j;
    }
  }
}

void mem_reset_brk(void) {
  /* Every replay starts from a clean, zeroed heap. Up to MEM_KEEP_RESIDENT
   * the resident pages are zeroed in place rather than given back: the next
   * pass reuses the same addresses, so RSS does not grow, and a timed pass
   * does not pay a page fault per 4 KiB that the system allocator, reusing
   * its warm heap, does not pay (the classic memlib keeps its pages too).
   * What lies beyond is given back, so one huge trace does not pin its
   * memory. The break only grows between resets, so nothing past it was
   * touched since the last one. */
  if (heap_start && heap_brk > heap_start) {
    size_t used = (size_t)(heap_brk - heap_start);
    size_t keep = used < MEM_KEEP_RESIDENT ? used : MEM_KEEP_RESIDENT;
    zero_keeping_resident(heap_start, keep);
    if (used > keep) madvise(heap_start + keep, used - keep, MADV_DONTNEED);
  }
  heap_brk = heap_start;
  sbrk_calls = 0;
  if (guard_from && guard_from > heap_start) { /* the guard starts over with the heap */
    mprotect(heap_start, (size_t)(guard_from - heap_start), PROT_NONE);
    guard_from = heap_start;
  }
}

void *mem_heap_lo(void) { return heap_start; }
void *mem_heap_hi(void) { return heap_brk - 1; }
size_t mem_heapsize(void) { return (size_t)(heap_brk - heap_start); }
size_t mem_cap(void) { return heap_cap; }
size_t mem_sbrk_calls(void) { return sbrk_calls; }

size_t mem_pagesize(void) {
  static size_t page;
  if (!page) {
    long p = sysconf(_SC_PAGESIZE);
    page = p > 0 ? (size_t)p : 4096;
  }
  return page;
}
