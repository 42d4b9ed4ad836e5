/* fit_random.h — the assignment's two random workloads share one body and
 * differ in the size range and iteration count (fit_small_range.c,
 * fit_large_range.c).
 *
 * 10,000 items in two sets with sizes 32 × U[min_chunks, max_chunks] bytes
 * drawn with srand(0)/rand() (the assignment's seed and generator), a
 * shuffled free order; set 0 is allocated, then each iteration walks the
 * items in steps of 50: free 50 of the current set in shuffled order, then
 * allocate the next 50 of the other set. Fragmentation is sampled at the end.
 */
#ifndef TESSERA_FIT_RANDOM_H
#define TESSERA_FIT_RANDOM_H

int fit_random_workload(const char *name, unsigned min_chunks, unsigned max_chunks, long default_iters,
                        int argc, char **argv);

#endif
