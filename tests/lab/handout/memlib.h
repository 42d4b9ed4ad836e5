/* A mock of the classic CS:APP malloc-lab memlib.h, written for Tessera's
 * handout test: same names and signatures as the handout (note mem_sbrk
 * takes an int), so a policy built against it builds against the real one. */
#include <unistd.h>

void mem_init(void);
void mem_deinit(void);
void *mem_sbrk(int incr);
void mem_reset_brk(void);
void *mem_heap_lo(void);
void *mem_heap_hi(void);
size_t mem_heapsize(void);
size_t mem_pagesize(void);
