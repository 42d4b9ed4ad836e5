/* memlib: the simulated heap the lab policies grow with mem_sbrk.
 *
 * One region is reserved up front (address space only; pages are committed by
 * the kernel on first touch), so a large cap costs nothing until used. The
 * break only moves inside that region. Names and semantics follow the CS:APP
 * malloc-lab memlib, so a lab policy compiles unchanged inside a handout. */
#ifndef TESSERA_LAB_MEMLIB_H
#define TESSERA_LAB_MEMLIB_H

#include <stddef.h>
#include <stdint.h>

#define MEM_DEFAULT_CAP ((size_t)128 << 20) /* 128 MiB; the classic lab used 20 MB */

/* Reserve a heap of at most cap bytes (0 = MEM_DEFAULT_CAP). Calling it again
 * releases the previous heap first. Returns 0, or -1 with errno set. */
int mem_init_cap(size_t cap);
/* The handout's name for mem_init_cap(MEM_DEFAULT_CAP); aborts on failure as
 * the handout does. */
void mem_init(void);
void mem_deinit(void);

/* Grow the break by incr bytes and return the old break. A negative incr, or
 * one past the cap, returns (void *)-1 with errno = ENOMEM and leaves the
 * break where it was. The lab's takes an intptr_t (its wide growths); the
 * handout's takes an int, and a student's mm.c loaded by `tessera lab --mm`
 * links against that one (lab/student.c), so the lab's own is renamed here.
 * Policy code calls mem_sbrk either way, and compiles unchanged in a
 * handout. */
#define mem_sbrk lab_mem_sbrk
void *mem_sbrk(intptr_t incr);

void mem_reset_brk(void);        /* empty the heap: break back to the start */
/* 1: pages past the break's page are PROT_NONE (a write past the break
 * faults); 0: the whole region is writable again. 0, or -1 if mprotect
 * failed. The driver guards its checked passes. */
int mem_guard(int on);
void *mem_heap_lo(void);         /* first byte of the heap */
void *mem_heap_hi(void);         /* last byte of the heap (break - 1) */
size_t mem_heapsize(void);       /* break - start */
size_t mem_pagesize(void);       /* the OS page size, asked at run time */
size_t mem_cap(void);            /* the configured cap */
size_t mem_sbrk_calls(void);     /* successful mem_sbrk calls since the last reset */

#endif
