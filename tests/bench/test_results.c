/* Unit tests of results.csv handling (bench_results.c) and of the report
 * table built from records (bench_report.c): round trip of every field,
 * rejection of malformed files with file:line messages, medians and ratios
 * per cell, failed runs kept visible and out of the geometric mean, and the
 * fixed column order. */
#include "bench_report.h"
#include "bench_results.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-6 * (fabs(b) > 1 ? fabs(b) : 1); }

static bench_record_t make(const char *workload, const char *alloc, int threads, int run, double time, long rss,
                           const char *status) {
  bench_record_t r;
  memset(&r, 0, sizeof r);
  snprintf(r.workload, sizeof r.workload, "%s", workload);
  snprintf(r.allocator, sizeof r.allocator, "%s", alloc);
  r.threads = threads;
  r.run = run;
  r.wall_s = time + 0.001;
  r.work_s = time;
  r.cpu_s = time;
  r.user_s = time;
  r.sys_s = 0;
  r.peak_rss_kib = rss;
  snprintf(r.status, sizeof r.status, "%s", status);
  return r;
}

static char tmp_path[64];

static void write_file(const char *text) {
  FILE *f = fopen(tmp_path, "w");
  fputs(text, f);
  fclose(f);
}

/* Reads tmp_path expecting failure; checks the message has file:line and what. */
static void expect_error(const char *text, int line, const char *what) {
  write_file(text);
  bench_record_t *recs;
  size_t n;
  char err[512], want[128];
  CHECK(bench_csv_read(tmp_path, &recs, &n, err, sizeof err) == -1);
  snprintf(want, sizeof want, "%s:%d: ", tmp_path, line);
  if (strncmp(err, want, strlen(want)) || !strstr(err, what)) {
    fprintf(stderr, "  got '%s', wanted '%s...%s'\n", err, want, what);
    failures++;
  }
}

static void test_round_trip(void) {
  bench_record_t in[3] = {make("larson", "tessera", 4, 2, 0.5, 2048, "ok"),
                          make("mixed", "mimalloc", 1, 1, 0.25, 999, "signal:SIGSEGV"),
                          make("redis", "system", 1, 3, 1.0, 12, "skipped")};
  in[0].work_s = NAN; /* no measured region: the time is the wall time */
  snprintf(in[0].extra, sizeof in[0].extra, "ops_per_s=123456;phase_1_rss_kib=42");
  FILE *f = fopen(tmp_path, "w");
  bench_csv_write_header(f);
  for (int i = 0; i < 3; i++) bench_csv_write(f, &in[i]);
  fclose(f);
  bench_record_t *out;
  size_t n;
  char err[512];
  CHECK(bench_csv_read(tmp_path, &out, &n, err, sizeof err) == 0);
  CHECK(n == 3);
  if (n != 3) return;
  CHECK(!strcmp(out[0].workload, "larson") && !strcmp(out[0].allocator, "tessera"));
  CHECK(out[0].threads == 4 && out[0].run == 2);
  CHECK(close_to(out[0].wall_s, 0.501) && isnan(out[0].work_s));
  CHECK(close_to(bench_record_time(&out[0]), 0.501));
  CHECK(out[0].peak_rss_kib == 2048 && bench_record_ok(&out[0]));
  CHECK(!strcmp(out[0].extra, "ops_per_s=123456;phase_1_rss_kib=42"));
  CHECK(close_to(bench_record_time(&out[1]), 0.25));
  CHECK(!strcmp(out[1].status, "signal:SIGSEGV") && !bench_record_ok(&out[1]));
  CHECK(!strcmp(out[2].status, "skipped"));
  free(out);
}

static void test_parse_errors(void) {
  expect_error("", 1, "empty file");
  expect_error("workload,allocator,threads\n", 1, "header");
  const char *h = BENCH_CSV_HEADER "\n";
  char buf[1024];
  snprintf(buf, sizeof buf, "%ssingle,system,1,1,0.5,0.5,100,ok,0.5,0,0.4\n", h);
  expect_error(buf, 2, "12 comma-separated fields");
  snprintf(buf, sizeof buf, "%ssingle,system,1,1,0.5,0.5,100,ok,0.5,0,0.4,\nsingle,system,1,2,0.5,0.5,100,crashed,0.5,0,0.4,\n", h);
  expect_error(buf, 3, "unknown status");
  snprintf(buf, sizeof buf, "%ssingle,system,0,1,0.5,0.5,100,ok,0.5,0,0.4,\n", h);
  expect_error(buf, 2, "threads");
  snprintf(buf, sizeof buf, "%ssingle,system,1,1,-0.5,0.5,100,ok,0.5,0,0.4,\n", h);
  expect_error(buf, 2, "wall_s");
  snprintf(buf, sizeof buf, "%ssingle,system,1,1,0.5,0.5,lots,ok,0.5,0,0.4,\n", h);
  expect_error(buf, 2, "peak_rss_kib");
  snprintf(buf, sizeof buf, "%ssin gle,system,1,1,0.5,0.5,100,ok,0.5,0,0.4,\n", h);
  expect_error(buf, 2, "workload name");
  snprintf(buf, sizeof buf, "%ssingle,system,1,1,,0.5,,ok,0.5,0,0.4,\n", h);
  expect_error(buf, 2, "an ok run must have");
  snprintf(buf, sizeof buf, "%ssingle,system,1,1,0.5,0.5,100,exit:300,0.5,0,0.4,\n", h);
  expect_error(buf, 2, "unknown status");
  /* A failed run may lack figures; blank lines and CRLF are accepted. */
  snprintf(buf, sizeof buf, "%s\r\nsingle,system,1,1,,,,timeout,,,,\r\n\n", h);
  write_file(buf);
  bench_record_t *recs;
  size_t n;
  char err[512];
  CHECK(bench_csv_read(tmp_path, &recs, &n, err, sizeof err) == 0 && n == 1);
  if (n == 1) CHECK(!strcmp(recs[0].status, "timeout") && isnan(recs[0].wall_s) && recs[0].peak_rss_kib == -1);
  free(recs);
  CHECK(bench_csv_read("/nonexistent/results.csv", &recs, &n, err, sizeof err) == -1);
  CHECK(strstr(err, "/nonexistent/results.csv: cannot open") != NULL);
}

static void test_table(void) {
  bench_record_t r[] = {
    /* mimalloc first in the records: the columns must still start with system. */
    make("single", "mimalloc", 1, 1, 0.50, 2000, "ok"),
    make("single", "system", 1, 1, 1.00, 1000, "ok"),
    make("single", "mimalloc", 1, 2, 0.40, 2000, "ok"),
    make("single", "system", 1, 2, 0.80, 1000, "ok"),
    make("single", "mimalloc", 1, 3, 0.90, 2000, "ok"),
    make("single", "system", 1, 3, 1.20, 1000, "ok"),
    make("larson", "system", 4, 1, 2.00, 4000, "ok"),
    make("larson", "mimalloc", 4, 1, 4.00, 2000, "ok"),
    make("larson", "system", 8, 1, 2.00, 4000, "ok"),
    make("larson", "mimalloc", 8, 1, 1.00, 2000, "signal:SIGSEGV"),
    make("redis", "system", 1, 1, 0, 0, "skipped"),
    make("redis", "mimalloc", 1, 1, 0, 0, "skipped"),
  };
  bench_table_t t;
  CHECK(bench_table_build(r, sizeof r / sizeof r[0], "system", &t) == 0);
  CHECK(t.n_allocs == 2 && t.n_rows == 4);
  if (t.n_allocs != 2 || t.n_rows != 4) return;
  CHECK(!strcmp(t.allocs[0], "system") && !strcmp(t.allocs[1], "mimalloc"));
  CHECK(t.baseline == 0);
  CHECK(!strcmp(t.rows[0].label, "single") && !strcmp(t.rows[1].label, "larson/4t") &&
        !strcmp(t.rows[2].label, "larson/8t"));
  bench_cell_t *sys_single = bench_cell(&t, 0, 0), *mi_single = bench_cell(&t, 0, 1);
  CHECK(sys_single->runs == 3 && sys_single->ok == 3);
  CHECK(close_to(sys_single->time.median, 1.0) && close_to(sys_single->time.min, 0.8) &&
        close_to(sys_single->time.max, 1.2));
  CHECK(close_to(mi_single->time.median, 0.5));
  CHECK(close_to(mi_single->time_ratio, 0.5) && close_to(mi_single->rss_ratio, 2.0));
  CHECK(close_to(sys_single->time_ratio, 1.0));
  CHECK(close_to(bench_cell(&t, 1, 1)->time_ratio, 2.0));
  /* The crashed cell: failure recorded, no ratio, left out of the geomean. */
  bench_cell_t *crashed = bench_cell(&t, 2, 1);
  CHECK(!strcmp(crashed->failure, "signal:SIGSEGV") && crashed->ok == 0 && isnan(crashed->time_ratio));
  CHECK(bench_cell(&t, 3, 1)->skipped == 1 && isnan(bench_cell(&t, 3, 1)->time_ratio));
  CHECK(t.geo_rows[1] == 2);
  CHECK(close_to(t.geo_time[1], 1.0));     /* sqrt(0.5 * 2.0) */
  CHECK(close_to(t.geo_rss[1], sqrt(2.0 * 0.5)));
  /* Of these rows only "single" is one of the seed's six. */
  CHECK(t.seed_rows[1] == 1 && close_to(t.seed_time[1], 0.5) && close_to(t.seed_rss[1], 2.0));

  /* The renderings mention the failure and the skip. */
  char md[sizeof tmp_path + 8];
  snprintf(md, sizeof md, "%s.md", tmp_path);
  const char *notes[] = {"allocator tcmalloc: not found"};
  bench_report_info_t info = {"tessera bench --test", "2026-01-01T00:00:00Z", "test machine", notes, 1, NULL, 0};
  CHECK(bench_write_markdown(md, &t, &info) == 0);
  FILE *f = fopen(md, "r");
  char text[8192] = "";
  size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[got] = '\0';
  if (f) fclose(f);
  CHECK(strstr(text, "| larson/8t |") != NULL);
  CHECK(strstr(text, "FAIL signal:SIGSEGV") != NULL);
  CHECK(strstr(text, "0.50/2.00") != NULL);
  CHECK(strstr(text, "allocator tcmalloc: not found") != NULL);
  CHECK(strstr(text, "skipped") != NULL);
  CHECK(strstr(text, "| **geomean seed rows** | 1.00/1.00 | **0.50/2.00** (1 rows) |") != NULL);
  unlink(md);
  bench_table_free(&t);

  /* A noisy cell is marked: runs 1.0 and 2.0 against a steady baseline. */
  bench_record_t spread[] = {
    make("mixed", "system", 1, 1, 1.0, 100, "ok"), make("mixed", "system", 1, 2, 1.0, 100, "ok"),
    make("mixed", "tcmalloc", 1, 1, 1.0, 100, "ok"), make("mixed", "tcmalloc", 1, 2, 2.0, 100, "ok"),
    make("mixed", "tcmalloc", 1, 3, 1.5, 100, "ok"), make("mixed", "system", 1, 3, 1.02, 100, "ok"),
  };
  CHECK(bench_table_build(spread, 6, "system", &t) == 0);
  CHECK(close_to(bench_cell(&t, 0, 1)->time_ratio, 1.5));
  CHECK(bench_write_markdown(md, &t, &info) == 0);
  f = fopen(md, "r");
  got = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[got] = '\0';
  if (f) fclose(f);
  CHECK(strstr(text, "| 1.50/1.00~ |") != NULL);
  unlink(md);
  bench_table_free(&t);

  /* --metric cpu compares CPU time: mimalloc used a quarter of system's. */
  r[0].cpu_s = r[2].cpu_s = r[4].cpu_s = 0.25;
  r[1].cpu_s = r[3].cpu_s = r[5].cpu_s = 1.0;
  CHECK(bench_table_build_metric(r, 6, "system", BENCH_METRIC_CPU, &t) == 0);
  CHECK(t.metric == BENCH_METRIC_CPU && close_to(bench_cell(&t, 0, 1)->time_ratio, 0.25));
  bench_table_free(&t);
  CHECK(bench_table_build_metric(r, 6, "system", BENCH_METRIC_WALL, &t) == 0);
  CHECK(close_to(bench_cell(&t, 0, 1)->time.median, 0.501) && close_to(bench_cell(&t, 0, 0)->time.median, 1.001));
  bench_table_free(&t);
  bench_metric_t m;
  CHECK(bench_metric_parse("cpu", &m) == 0 && m == BENCH_METRIC_CPU && !strcmp(bench_metric_name(m), "cpu"));
  CHECK(bench_metric_parse("work", &m) == 0 && m == BENCH_METRIC_WORK);
  CHECK(bench_metric_parse("CPU", &m) == -1 && bench_metric_parse("", &m) == -1);

  /* A baseline without runs: the table still builds, without ratios. */
  CHECK(bench_table_build(r, 2, "jemalloc", &t) == 0);
  CHECK(t.baseline == -1 && isnan(bench_cell(&t, 0, 0)->time_ratio));
  bench_table_free(&t);
}

int main(void) {
  snprintf(tmp_path, sizeof tmp_path, "/tmp/tessera-bench-test-%d.csv", (int)getpid());
  test_round_trip();
  test_parse_errors();
  test_table();
  unlink(tmp_path);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("bench results/report: all checks passed\n");
  return 0;
}
