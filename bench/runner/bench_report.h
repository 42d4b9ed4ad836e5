/* Turning run records into the comparison: the per-cell summaries (median
 * and spread of time, CPU and peak RSS over the runs of one workload row
 * under one allocator), ratios against the baseline allocator, the geometric
 * mean of each allocator's ratios, and the three renderings of it — the
 * terminal table, report.md and results.json.
 * Works from records alone (bench_results.h), so a report can be rebuilt
 * from a results.csv (`tessera bench --from DIR`). Failed runs are counted
 * and shown, never dropped: a cell with any failed run says so. Called by
 * tools/cmd_bench.c. */
#ifndef TESSERA_BENCH_REPORT_H
#define TESSERA_BENCH_REPORT_H

#include <stdio.h>

#include "bench_results.h"
#include "bench_stats.h"

typedef struct bench_cell_s {
  int runs;              /* records for this cell */
  int ok;                /* of which completed */
  int skipped;           /* of which skipped (program not installed) */
  char failure[BENCH_STATUS_MAX]; /* status of the first failed run, "" if none */
  bench_summary_t time;  /* seconds under the table's metric, ok runs only */
  bench_summary_t cpu;   /* seconds */
  bench_summary_t rss;   /* KiB */
  double time_ratio;     /* median time / baseline's median time (NAN if n/a) */
  double rss_ratio;
} bench_cell_t;

typedef struct bench_row_s {
  char workload[BENCH_NAME_MAX];
  int threads;
  char label[BENCH_NAME_MAX + 16]; /* "larson/4t" or "single" */
} bench_row_t;

typedef struct bench_table_s {
  size_t n_rows, n_allocs;
  bench_row_t *rows;              /* in order of first appearance */
  char (*allocs)[BENCH_NAME_MAX]; /* in order of first appearance */
  bench_cell_t *cells;            /* n_rows x n_allocs, row-major */
  int baseline;                   /* index into allocs, -1 when absent */
  double *geo_time, *geo_rss;     /* per allocator, over rows with a ratio */
  size_t *geo_rows;               /* rows that entered each geometric mean */
  double *seed_time, *seed_rss;   /* the same over the seed allocator's six rows (group "seed") */
  size_t *seed_rows;
  bench_metric_t metric;          /* which time the cells and ratios use */
} bench_table_t;

typedef struct bench_report_info_s {
  const char *command;     /* the command line that produced the runs */
  const char *date;        /* UTC, ISO 8601 */
  const char *machine;     /* one line: CPU, cores, kernel */
  const char *const *notes;/* lines about skipped allocators/workloads */
  size_t n_notes;
  const char *const *charts; /* PNG file names that exist, for report.md */
  size_t n_charts;
} bench_report_info_t;

/* Builds the table; returns 0, or -1 when out of memory. baseline may name
 * an allocator that is absent from the records (then no ratios). */
int bench_table_build(const bench_record_t *recs, size_t n, const char *baseline, bench_table_t *t);
/* The same, comparing another time (bench_table_build uses BENCH_METRIC_WORK). */
int bench_table_build_metric(const bench_record_t *recs, size_t n, const char *baseline, bench_metric_t metric,
                             bench_table_t *t);
void bench_table_free(bench_table_t *t);

static inline bench_cell_t *bench_cell(const bench_table_t *t, size_t row, size_t alloc) {
  return &t->cells[row * t->n_allocs + alloc];
}

/* The terminal table: rows are workloads, columns allocators, cells are
 * "time ratio/RSS ratio" against the baseline (whose own column shows the
 * absolute medians). */
void bench_table_print(FILE *out, const bench_table_t *t);

int bench_write_markdown(const char *path, const bench_table_t *t, const bench_report_info_t *info);
int bench_write_json(const char *path, const bench_record_t *recs, size_t n, const bench_table_t *t,
                     const bench_report_info_t *info);
/* One JSON string, quoted and escaped; bytes that are not UTF-8 become
 * U+FFFD (also the lab's --json output, tools/cmd_lab.c). */
void bench_json_string(FILE *f, const char *str);

#endif
