/* Statistics for the comparison suite (see bench_stats.h). Called by the
 * report builder (bench_report.c) and the unit tests. Sorting is an insertion
 * sort into a scratch copy: a cell has a handful of runs, never thousands. */
#include "bench_stats.h"

#include <math.h>
#include <stdlib.h>

/* Copies the non-NAN values into a new array, sorted; returns the count, or
 * (size_t)-1 when out of memory. */
static size_t sorted_copy(const double *values, size_t n, double **out) {
  double *s = malloc((n ? n : 1) * sizeof *s);
  if (!s) return (size_t)-1;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    double v = values[i];
    if (isnan(v)) continue;
    size_t j = m++;
    while (j > 0 && s[j - 1] > v) {
      s[j] = s[j - 1];
      j--;
    }
    s[j] = v;
  }
  *out = s;
  return m;
}

double bench_quantile_sorted(const double *sorted, size_t n, double p) {
  if (n == 0 || isnan(p)) return NAN;
  if (p <= 0) return sorted[0];
  if (p >= 1) return sorted[n - 1];
  double pos = p * (double)(n - 1);
  size_t lo = (size_t)pos;
  double frac = pos - (double)lo;
  if (lo + 1 >= n) return sorted[n - 1];
  return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

int bench_summarize(const double *values, size_t n, bench_summary_t *out) {
  out->n = 0;
  out->median = out->min = out->max = out->q1 = out->q3 = NAN;
  double *s;
  size_t m = sorted_copy(values, n, &s);
  if (m == (size_t)-1) return -1;
  if (m == 0) {
    free(s);
    return -1;
  }
  out->n = m;
  out->min = s[0];
  out->max = s[m - 1];
  out->median = bench_quantile_sorted(s, m, 0.5);
  out->q1 = bench_quantile_sorted(s, m, 0.25);
  out->q3 = bench_quantile_sorted(s, m, 0.75);
  free(s);
  return 0;
}

double bench_median(const double *values, size_t n) {
  bench_summary_t s;
  return bench_summarize(values, n, &s) == 0 ? s.median : NAN;
}

double bench_ratio(double value, double baseline) {
  if (isnan(value) || isnan(baseline) || !(baseline > 0)) return NAN;
  return value / baseline;
}

double bench_geomean(const double *values, size_t n) {
  double log_sum = 0;
  size_t used = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(values[i])) continue;
    if (!(values[i] > 0)) return NAN;
    log_sum += log(values[i]);
    used++;
  }
  return used ? exp(log_sum / (double)used) : NAN;
}
