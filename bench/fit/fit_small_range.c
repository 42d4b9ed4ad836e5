/* fit_small_range.c — the assignment's small-range random workload: sizes
 * 32 × U[4, 16] bytes, 100 iterations (body in fit_random.c). */
#include "fit_random.h"

int main(int argc, char **argv) { return fit_random_workload("small_range", 4, 16, 100, argc, argv); }
