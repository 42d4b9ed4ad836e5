/* The machine description saved with every report (machine.txt): CPU model,
 * cores, memory, kernel, C library, the Debian package versions of the
 * allocators and real programs (dpkg-query, where available), the source
 * commit, and the allocator libraries actually used. Called once per run of
 * the suite by tools/cmd_bench.c. */
#ifndef TESSERA_BENCH_MACHINE_H
#define TESSERA_BENCH_MACHINE_H

#include <stddef.h>

#include "bench_catalog.h"

/* One line: "<cpu model>, <n> cores, <mem> GiB, Linux <release>". */
void bench_machine_summary(char *buf, size_t len);

/* Writes machine.txt; returns 0 or -1. */
int bench_machine_write(const char *path, const bench_allocator_t *allocs, size_t n_allocs,
                        const char *command);

/* Number of online CPUs (at least 1). */
int bench_cpu_count(void);

#endif
