/* Mock classic memlib: a 20 MB region from malloc, as in the handout. */
#include "memlib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_HEAP (20 * (1 << 20))

static char *mem_start_brk;
static char *mem_brk;
static char *mem_max_addr;

void mem_init(void) {
  if ((mem_start_brk = malloc(MAX_HEAP)) == NULL) {
    fprintf(stderr, "mem_init_vm: malloc error\n");
    exit(1);
  }
  mem_max_addr = mem_start_brk + MAX_HEAP;
  mem_brk = mem_start_brk;
}

void mem_deinit(void) { free(mem_start_brk); }

void mem_reset_brk(void) { mem_brk = mem_start_brk; }

void *mem_sbrk(int incr) {
  char *old_brk = mem_brk;
  if (incr < 0 || (mem_brk + incr) > mem_max_addr) {
    errno = ENOMEM;
    fprintf(stderr, "ERROR: mem_sbrk failed. Ran out of memory...\n");
    return (void *)-1;
  }
  mem_brk += incr;
  return (void *)old_brk;
}

void *mem_heap_lo(void) { return (void *)mem_start_brk; }
void *mem_heap_hi(void) { return (void *)(mem_brk - 1); }
size_t mem_heapsize(void) { return (size_t)(mem_brk - mem_start_brk); }
size_t mem_pagesize(void) { return (size_t)getpagesize(); }
