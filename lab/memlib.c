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
  heap_start = heap_brk = NULL;
  heap_cap = 0;
  sbrk_calls = 0;
}

void *mem_sbrk(intptr_t incr) {
  if (!heap_start || incr < 0 || (size_t)incr > heap_cap - (size_t)(heap_brk - heap_start)) {
    errno = ENOMEM;
    return (void *)-1;
  }
  char *old = heap_brk;
  heap_brk += incr;
  sbrk_calls++;
  return old;
}

/* Pages below this stay resident across resets (see mem_reset_brk). */
#define MEM_KEEP_RESIDENT ((size_t)256 << 20)

void mem_reset_brk(void) {
  /* Every replay starts from a clean, zeroed heap. Up to MEM_KEEP_RESIDENT
   * the pages are zeroed in place rather than given back: the next pass
   * reuses the same addresses, so RSS does not grow, and a timed pass does
   * not pay a page fault per 4 KiB that the system allocator, reusing its
   * warm heap, does not pay (the classic memlib keeps its pages too). What
   * lies beyond is given back, so one huge trace does not pin its memory. */
  if (heap_start && heap_brk > heap_start) {
    size_t used = (size_t)(heap_brk - heap_start);
    size_t keep = used < MEM_KEEP_RESIDENT ? used : MEM_KEEP_RESIDENT;
    memset(heap_start, 0, keep);
    if (used > keep) madvise(heap_start + keep, heap_cap - keep, MADV_DONTNEED);
  }
  heap_brk = heap_start;
  sbrk_calls = 0;
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
