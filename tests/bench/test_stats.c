/* Unit tests of bench/runner/bench_stats.c: median, quantiles, spread,
 * ratios and the geometric mean, including the NAN conventions (failed runs
 * are NAN and must be ignored, never counted as zero). */
#include "bench_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1); }

static void test_median(void) {
  double odd[] = {5, 1, 3};
  CHECK(close_to(bench_median(odd, 3), 3));
  CHECK(odd[0] == 5 && odd[1] == 1 && odd[2] == 3); /* input untouched */
  double even[] = {4, 1, 3, 2};
  CHECK(close_to(bench_median(even, 4), 2.5));
  double one[] = {7.25};
  CHECK(close_to(bench_median(one, 1), 7.25));
  double with_nan[] = {NAN, 10, 2, NAN, 4};
  CHECK(close_to(bench_median(with_nan, 5), 4));
  double all_nan[] = {NAN, NAN};
  CHECK(isnan(bench_median(all_nan, 2)));
  CHECK(isnan(bench_median(NULL, 0)));
  double dup[] = {2, 2, 2, 9};
  CHECK(close_to(bench_median(dup, 4), 2));
}

static void test_summary(void) {
  double v[] = {9, 1, 5, 3, 7};
  bench_summary_t s;
  CHECK(bench_summarize(v, 5, &s) == 0);
  CHECK(s.n == 5);
  CHECK(close_to(s.min, 1) && close_to(s.max, 9));
  CHECK(close_to(s.median, 5));
  CHECK(close_to(s.q1, 3) && close_to(s.q3, 7));
  double w[] = {1, 2, 3, 4};
  CHECK(bench_summarize(w, 4, &s) == 0);
  CHECK(close_to(s.q1, 1.75) && close_to(s.q3, 3.25) && close_to(s.median, 2.5));
  double x[] = {NAN, 4, NAN};
  CHECK(bench_summarize(x, 3, &s) == 0);
  CHECK(s.n == 1 && close_to(s.min, 4) && close_to(s.max, 4) && close_to(s.median, 4));
  double none[] = {NAN};
  CHECK(bench_summarize(none, 1, &s) == -1);
  CHECK(s.n == 0 && isnan(s.median) && isnan(s.min));
  double sorted[] = {10, 20, 30};
  CHECK(close_to(bench_quantile_sorted(sorted, 3, 0), 10));
  CHECK(close_to(bench_quantile_sorted(sorted, 3, 1), 30));
  CHECK(close_to(bench_quantile_sorted(sorted, 3, 0.25), 15));
  CHECK(isnan(bench_quantile_sorted(sorted, 0, 0.5)));
}

static void test_ratio(void) {
  CHECK(close_to(bench_ratio(3, 2), 1.5));
  CHECK(close_to(bench_ratio(0, 2), 0));
  CHECK(isnan(bench_ratio(1, 0)));
  CHECK(isnan(bench_ratio(1, -1)));
  CHECK(isnan(bench_ratio(NAN, 1)));
  CHECK(isnan(bench_ratio(1, NAN)));
}

static void test_geomean(void) {
  double v[] = {2, 8};
  CHECK(close_to(bench_geomean(v, 2), 4));
  double w[] = {0.5, 2, 1};
  CHECK(close_to(bench_geomean(w, 3), 1));
  double skip[] = {NAN, 3, NAN, 12};
  CHECK(close_to(bench_geomean(skip, 4), 6));
  double zero[] = {1, 0};
  CHECK(isnan(bench_geomean(zero, 2)));
  double negative[] = {4, -1};
  CHECK(isnan(bench_geomean(negative, 2)));
  CHECK(isnan(bench_geomean(NULL, 0)));
  double single[] = {1.7};
  CHECK(close_to(bench_geomean(single, 1), 1.7));
}

int main(void) {
  test_median();
  test_summary();
  test_ratio();
  test_geomean();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("bench stats: all checks passed\n");
  return 0;
}
