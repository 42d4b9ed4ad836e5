/* Statistics for the comparison suite: medians, spread, ratios and the
 * geometric mean of ratios. Pure functions over arrays of doubles, no I/O,
 * so they are unit-tested directly (tests/bench/test_stats.c).
 * Conventions: a missing or failed measurement is NAN; every function here
 * ignores NAN inputs and returns NAN when nothing is left to summarise. */
#ifndef TESSERA_BENCH_STATS_H
#define TESSERA_BENCH_STATS_H

#include <stddef.h>

typedef struct bench_summary_s {
  size_t n;       /* values that were not NAN */
  double median;
  double min, max;
  double q1, q3;  /* quartiles, linear interpolation between order statistics */
} bench_summary_t;

/* The p-quantile (0 <= p <= 1) of values already sorted ascending. */
double bench_quantile_sorted(const double *sorted, size_t n, double p);

/* Median of the non-NAN values (the input is not modified). */
double bench_median(const double *values, size_t n);

/* Median, min, max and quartiles of the non-NAN values. Returns 0, or -1
 * (and a summary of NANs with n = 0) when there are none. */
int bench_summarize(const double *values, size_t n, bench_summary_t *out);

/* value / baseline; NAN when either is NAN or baseline is not positive. */
double bench_ratio(double value, double baseline);

/* Geometric mean of the positive, non-NAN values; NAN when there are none
 * or when any value is zero or negative (a ratio can never be). */
double bench_geomean(const double *values, size_t n);

#endif
