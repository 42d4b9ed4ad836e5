/* fit_large_range.c — the assignment's large-range random workload: sizes
 * 32 × U[1, 2048] bytes, 50 iterations (body in fit_random.c). */
#include "fit_random.h"

int main(int argc, char **argv) { return fit_random_workload("large_range", 1, 2048, 50, argc, argv); }
