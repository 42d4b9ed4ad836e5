/* One measured run and its CSV form: the record type shared by the runner,
 * the report builder and the unit tests, and the reader/writer for
 * results.csv. The CSV is the suite's primary output — plot.py, scripts and
 * `tessera bench --from DIR` all read it — so its header is fixed:
 *   workload,allocator,threads,run,wall_s,cpu_s,peak_rss_kib,status,
 *   user_s,sys_s,work_s,extra
 * Fields never contain commas or quotes (names are checked, `extra` is a
 * `key=value;key=value` list), so no quoting is needed; a reader must still
 * reject anything else with `file:line: what is wrong`. */
#ifndef TESSERA_BENCH_RESULTS_H
#define TESSERA_BENCH_RESULTS_H

#include <stddef.h>
#include <stdio.h>

#define BENCH_CSV_HEADER \
  "workload,allocator,threads,run,wall_s,cpu_s,peak_rss_kib,status,user_s,sys_s,work_s,extra"

#define BENCH_NAME_MAX 64
#define BENCH_STATUS_MAX 32
#define BENCH_EXTRA_MAX 1024

typedef struct bench_record_s {
  char workload[BENCH_NAME_MAX];
  char allocator[BENCH_NAME_MAX];
  int threads;
  int run;                     /* 1-based run number */
  double wall_s;               /* whole process, monotonic clock */
  double cpu_s;                /* user + sys (wait4), or the workload's override */
  double user_s, sys_s;
  long peak_rss_kib;           /* ru_maxrss, or the workload's override */
  double work_s;               /* measured region reported by the workload; NAN if none */
  char status[BENCH_STATUS_MAX]; /* ok | exit:N | signal:NAME | timeout | skipped | error */
  char extra[BENCH_EXTRA_MAX]; /* key=value;key=value (workload metrics) */
} bench_record_t;

/* 1 when s is a usable workload/allocator name: [A-Za-z0-9_.+-], 1..63 chars. */
int bench_valid_name(const char *s);

/* The time a report compares: work_s when the workload reported it, else
 * the process wall time. */
double bench_record_time(const bench_record_t *r);

/* Which time a report compares. */
typedef enum bench_metric_e {
  BENCH_METRIC_WORK, /* work_s when reported, else wall_s (the default) */
  BENCH_METRIC_WALL, /* whole-process wall time */
  BENCH_METRIC_CPU   /* user + sys CPU time: steadier on a loaded machine,
                        but blind to time spent waiting (locks, yields) */
} bench_metric_t;

/* The record's time under a metric (NAN when absent). */
double bench_record_metric(const bench_record_t *r, bench_metric_t metric);

/* "work", "wall", "cpu" <-> metric; parse returns -1 for anything else. */
const char *bench_metric_name(bench_metric_t metric);
int bench_metric_parse(const char *name, bench_metric_t *metric);

/* 1 when the run completed (status "ok"). */
int bench_record_ok(const bench_record_t *r);

void bench_csv_write_header(FILE *out);
void bench_csv_write(FILE *out, const bench_record_t *r);

/* Reads a results.csv. On success returns 0 with a malloc'd array in *out
 * (free() it) and its length in *count. On failure returns -1 and writes
 * "path:line: what is wrong" (or "path: ..." for a directory or other
 * file that is not a regular one) into err. */
int bench_csv_read(const char *path, bench_record_t **out, size_t *count, char *err, size_t err_len);

/* Parses one data line (no trailing newline needed) into r; returns NULL on
 * success or a static description of what is wrong. */
const char *bench_csv_parse_line(const char *line, bench_record_t *r);

#endif
