/* my_malloc.h — the classic "first fit / best fit over sbrk" assignment
 * interface, implemented by libmymalloc (compat/).
 *
 * The names and signatures are exactly those of the systems-programming
 * assignment so that its test programs (`#include "my_malloc.h"`, `-DFF` /
 * `-DBF`, `ff_malloc`, `get_data_segment_size`, ...) build unchanged with
 *     gcc -DFF -Icompat prog.c build/libmymalloc.a
 *
 * Semantics (see docs/ARCHITECTURE.md, section compat):
 *  - every payload is 16-byte aligned; malloc(0) returns a unique minimal
 *    block; a request that cannot be served returns NULL with errno=ENOMEM;
 *  - free(NULL) is a no-op; any of the free functions accepts a block from any
 *    of the malloc functions (the block remembers which heap owns it); a double
 *    free or a foreign pointer is reported on stderr and ignored;
 *  - ff_ and bf_ are not thread-safe (as in the assignment); ts_ are;
 *  - TESSERA_FIT_IMPL=naive selects the linear-scan implementations (read
 *    once, at the first call); anything else, or unset, the O(log n) ones.
 */
#ifndef TESSERA_MY_MALLOC_H
#define TESSERA_MY_MALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* First fit: the lowest-address free block that is large enough. */
void *ff_malloc(size_t size);
void ff_free(void *ptr);

/* Best fit: a smallest free block that is large enough; an exact fit ends the
 * search. */
void *bf_malloc(size_t size);
void bf_free(void *ptr);

/* Thread-safe best fit, one lock around the whole allocator. */
void *ts_malloc_lock(size_t size);
void ts_free_lock(void *ptr);

/* Thread-safe best fit with a heap per thread: only growing the program break
 * takes a lock. A block freed by another thread goes back to its owner's heap
 * (on the owner's next allocation). */
void *ts_malloc_nolock(size_t size);
void ts_free_nolock(void *ptr);

/* Bytes this library obtained from sbrk (all heaps together). */
unsigned long get_data_segment_size(void);
/* Of those, bytes in free blocks, headers of free blocks included. */
unsigned long get_data_segment_free_space_size(void);

#ifdef __cplusplus
}
#endif

#endif
