/* Summaries, ratios and the rendered reports (see bench_report.h).
 * Ratios are of medians (median time under A / median time under the
 * baseline), not medians of per-run ratios: runs of different allocators are
 * interleaved but not paired one to one. */
#include "bench_report.h"

#include "bench_catalog.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_RANK_MAX 256 /* columns beyond this keep their order of appearance */
#define BENCH_NOISY 0.25   /* (max - min) / median of a cell's times */

static int find_row(const bench_table_t *t, const char *workload, int threads) {
  for (size_t i = 0; i < t->n_rows; i++)
    if (t->rows[i].threads == threads && !strcmp(t->rows[i].workload, workload)) return (int)i;
  return -1;
}

static int find_alloc(const bench_table_t *t, const char *name) {
  for (size_t i = 0; i < t->n_allocs; i++)
    if (!strcmp(t->allocs[i], name)) return (int)i;
  return -1;
}

void bench_table_free(bench_table_t *t) {
  free(t->rows);
  free(t->allocs);
  free(t->cells);
  free(t->geo_time);
  free(t->geo_rss);
  free(t->geo_rows);
  free(t->seed_time);
  free(t->seed_rss);
  free(t->seed_rows);
  memset(t, 0, sizeof *t);
}

/* 1 when row r belongs to the catalog group (NULL: every row). */
static int row_in_group(const bench_table_t *t, size_t r, const char *group) {
  if (!group) return 1;
  const bench_workload_t *w = bench_find_workload(t->rows[r].workload);
  return w && !strcmp(w->group, group);
}

/* Geometric means of allocator a's time and RSS ratios over the rows of a
 * group that have a ratio. Returns 0, or -1 when out of memory. */
static int geomean_over(const bench_table_t *t, size_t a, const char *group, double *time, double *rss,
                        size_t *rows) {
  double *time_ratios = malloc((t->n_rows ? t->n_rows : 1) * sizeof(double));
  double *rss_ratios = malloc((t->n_rows ? t->n_rows : 1) * sizeof(double));
  if (!time_ratios || !rss_ratios) {
    free(time_ratios);
    free(rss_ratios);
    return -1;
  }
  size_t m = 0;
  for (size_t r = 0; r < t->n_rows; r++) {
    const bench_cell_t *c = bench_cell(t, r, a);
    if (isnan(c->time_ratio) || !row_in_group(t, r, group)) continue;
    time_ratios[m] = c->time_ratio;
    rss_ratios[m] = c->rss_ratio;
    m++;
  }
  *time = bench_geomean(time_ratios, m);
  *rss = bench_geomean(rss_ratios, m);
  *rows = m;
  free(time_ratios);
  free(rss_ratios);
  return 0;
}

int bench_table_build(const bench_record_t *recs, size_t n, const char *baseline, bench_table_t *t) {
  return bench_table_build_metric(recs, n, baseline, BENCH_METRIC_WORK, t);
}

int bench_table_build_metric(const bench_record_t *recs, size_t n, const char *baseline, bench_metric_t metric,
                             bench_table_t *t) {
  memset(t, 0, sizeof *t);
  t->metric = metric;
  t->baseline = -1;
  t->rows = calloc(n ? n : 1, sizeof *t->rows);
  t->allocs = calloc(n ? n : 1, sizeof *t->allocs);
  if (!t->rows || !t->allocs) goto oom;
  for (size_t i = 0; i < n; i++) {
    if (find_row(t, recs[i].workload, recs[i].threads) < 0) {
      bench_row_t *row = &t->rows[t->n_rows++];
      snprintf(row->workload, sizeof row->workload, "%s", recs[i].workload);
      row->threads = recs[i].threads;
      if (recs[i].threads > 1) snprintf(row->label, sizeof row->label, "%s/%dt", recs[i].workload, recs[i].threads);
      else snprintf(row->label, sizeof row->label, "%s", recs[i].workload);
    }
    if (find_alloc(t, recs[i].allocator) < 0) snprintf(t->allocs[t->n_allocs++], BENCH_NAME_MAX, "%s", recs[i].allocator);
  }
  /* Columns in a fixed order whatever the run order was (it is rotated):
   * the known allocators first, then the others as they appeared. */
  static const char *const preferred[] = {"system", "tessera", "jemalloc", "tcmalloc", "mimalloc"};
  const size_t n_pref = sizeof preferred / sizeof preferred[0];
  size_t rank[BENCH_RANK_MAX];
  for (size_t a = 0; a < t->n_allocs && a < BENCH_RANK_MAX; a++) {
    rank[a] = n_pref + a;
    for (size_t p = 0; p < n_pref; p++)
      if (!strcmp(t->allocs[a], preferred[p])) rank[a] = p;
  }
  for (size_t a = 1; a < t->n_allocs && a < BENCH_RANK_MAX; a++)
    for (size_t b = a; b > 0 && rank[b - 1] > rank[b]; b--) {
      char tmp[BENCH_NAME_MAX];
      size_t r = rank[b];
      memcpy(tmp, t->allocs[b], sizeof tmp);
      memcpy(t->allocs[b], t->allocs[b - 1], sizeof tmp);
      memcpy(t->allocs[b - 1], tmp, sizeof tmp);
      rank[b] = rank[b - 1];
      rank[b - 1] = r;
    }
  t->baseline = baseline ? find_alloc(t, baseline) : -1;
  size_t n_cells = t->n_rows * t->n_allocs;
  t->cells = calloc(n_cells ? n_cells : 1, sizeof *t->cells);
  t->geo_time = calloc(t->n_allocs ? t->n_allocs : 1, sizeof(double));
  t->geo_rss = calloc(t->n_allocs ? t->n_allocs : 1, sizeof(double));
  t->geo_rows = calloc(t->n_allocs ? t->n_allocs : 1, sizeof(size_t));
  t->seed_time = calloc(t->n_allocs ? t->n_allocs : 1, sizeof(double));
  t->seed_rss = calloc(t->n_allocs ? t->n_allocs : 1, sizeof(double));
  t->seed_rows = calloc(t->n_allocs ? t->n_allocs : 1, sizeof(size_t));
  double *time = malloc((n ? n : 1) * sizeof(double));
  double *cpu = malloc((n ? n : 1) * sizeof(double));
  double *rss = malloc((n ? n : 1) * sizeof(double));
  if (!t->cells || !t->geo_time || !t->geo_rss || !t->geo_rows || !t->seed_time || !t->seed_rss ||
      !t->seed_rows || !time || !cpu || !rss) {
    free(time); free(cpu); free(rss);
    goto oom;
  }
  for (size_t r = 0; r < t->n_rows; r++) {
    for (size_t a = 0; a < t->n_allocs; a++) {
      bench_cell_t *c = bench_cell(t, r, a);
      size_t m = 0;
      for (size_t i = 0; i < n; i++) {
        const bench_record_t *rec = &recs[i];
        if (rec->threads != t->rows[r].threads || strcmp(rec->workload, t->rows[r].workload) ||
            strcmp(rec->allocator, t->allocs[a]))
          continue;
        c->runs++;
        if (!strcmp(rec->status, "skipped")) {
          c->skipped++;
          continue;
        }
        if (!bench_record_ok(rec)) {
          if (!c->failure[0]) snprintf(c->failure, sizeof c->failure, "%s", rec->status);
          continue;
        }
        c->ok++;
        time[m] = bench_record_metric(rec, metric);
        cpu[m] = rec->cpu_s;
        rss[m] = rec->peak_rss_kib >= 0 ? (double)rec->peak_rss_kib : NAN;
        m++;
      }
      bench_summarize(time, m, &c->time);
      bench_summarize(cpu, m, &c->cpu);
      bench_summarize(rss, m, &c->rss);
    }
  }
  free(cpu);
  free(rss);
  /* Ratios only where both sides have no failure: a partly failed cell is
   * shown as failed, not quietly averaged over its surviving runs. */
  for (size_t r = 0; r < t->n_rows; r++)
    for (size_t a = 0; a < t->n_allocs; a++) {
      bench_cell_t *c = bench_cell(t, r, a);
      c->time_ratio = c->rss_ratio = NAN;
      if (t->baseline < 0) continue;
      bench_cell_t *b = bench_cell(t, r, (size_t)t->baseline);
      if (c->failure[0] || b->failure[0]) continue;
      c->time_ratio = bench_ratio(c->time.median, b->time.median);
      c->rss_ratio = bench_ratio(c->rss.median, b->rss.median);
    }
  free(time);
  for (size_t a = 0; a < t->n_allocs; a++) {
    if (geomean_over(t, a, NULL, &t->geo_time[a], &t->geo_rss[a], &t->geo_rows[a]) ||
        geomean_over(t, a, "seed", &t->seed_time[a], &t->seed_rss[a], &t->seed_rows[a]))
      goto oom;
  }
  return 0;
oom:
  bench_table_free(t);
  return -1;
}

/* 1 when a cell's runs spread by more than BENCH_NOISY of their median:
 * its ratio deserves less trust (a busy machine, or a bimodal workload). */
static int noisy(const bench_cell_t *c) {
  return c->time.n > 1 && c->time.median > 0 && (c->time.max - c->time.min) / c->time.median > BENCH_NOISY;
}

static const char *metric_text(bench_metric_t metric) {
  switch (metric) {
    case BENCH_METRIC_WALL: return "Time is the whole process's wall time (`--metric wall`).";
    case BENCH_METRIC_CPU: return "Time is the process's user+sys CPU time (`--metric cpu`).";
    case BENCH_METRIC_WORK: break;
  }
  return "Time is the workload's measured region (`work_s`) where it reports one, else the process wall time.";
}

/* Formats a cell for the ratio tables; returns buf. */
static const char *ratio_cell(const bench_table_t *t, size_t r, size_t a, int markdown, char *buf, size_t len) {
  const bench_cell_t *c = bench_cell(t, r, a);
  if (c->runs == 0) snprintf(buf, len, "-");
  else if (c->failure[0]) snprintf(buf, len, "FAIL %s (%d/%d ok)", c->failure, c->ok, c->runs);
  else if (c->skipped == c->runs) snprintf(buf, len, "skipped");
  else if ((int)a == t->baseline) {
    if (markdown) snprintf(buf, len, "%.3f s, %.1f MiB", c->time.median, c->rss.median / 1024.0);
    else snprintf(buf, len, "%.3fs %.1fM", c->time.median, c->rss.median / 1024.0);
  } else if (isnan(c->time_ratio)) snprintf(buf, len, "n/a");
  else
    snprintf(buf, len, "%.2f/%.2f%s", c->time_ratio, c->rss_ratio,
             noisy(c) || noisy(bench_cell(t, r, (size_t)t->baseline)) ? "~" : "");
  return buf;
}

/* One summary row of the terminal table (skipped when no row entered it). */
static void summary_line(FILE *out, const bench_table_t *t, const char *label, int label_w, int cell_w,
                         const double *time, const double *rss, const size_t *rows) {
  int any = 0;
  for (size_t a = 0; a < t->n_allocs; a++) any |= rows[a] > 0;
  if (!any) return;
  fprintf(out, "%-*s", label_w, label);
  for (size_t a = 0; a < t->n_allocs; a++) {
    char buf[32];
    if ((int)a == t->baseline) snprintf(buf, sizeof buf, "1.00/1.00");
    else if (isnan(time[a])) snprintf(buf, sizeof buf, "n/a");
    else snprintf(buf, sizeof buf, "%.2f/%.2f", time[a], rss[a]);
    fprintf(out, " %*s", cell_w, buf);
  }
  fputc('\n', out);
}

/* The same as a Markdown table row. */
static void summary_row_md(FILE *f, const bench_table_t *t, const char *label, const double *time,
                           const double *rss, const size_t *rows) {
  int any = 0;
  for (size_t a = 0; a < t->n_allocs; a++) any |= rows[a] > 0;
  if (!any) return;
  fprintf(f, "| **%s** |", label);
  for (size_t a = 0; a < t->n_allocs; a++) {
    if ((int)a == t->baseline) fprintf(f, " 1.00/1.00 |");
    else if (isnan(time[a])) fprintf(f, " n/a |");
    else fprintf(f, " **%.2f/%.2f** (%zu rows) |", time[a], rss[a], rows[a]);
  }
  fputc('\n', f);
}

void bench_table_print(FILE *out, const bench_table_t *t) {
  int label_w = 18, cell_w = 15; /* 18: room for "geomean seed rows" */
  for (size_t r = 0; r < t->n_rows; r++)
    if ((int)strlen(t->rows[r].label) + 1 > label_w) label_w = (int)strlen(t->rows[r].label) + 1;
  char buf[96];
  if (t->baseline >= 0)
    fprintf(out, "\nCells (%s time): time ratio / peak-RSS ratio against %s (below 1.00 is better);\n"
                 "the %s column shows its median time and peak RSS; ~ marks a ratio whose\n"
                 "runs spread by more than 25%% of their median (noisy).\n\n",
            bench_metric_name(t->metric), t->allocs[t->baseline], t->allocs[t->baseline]);
  fprintf(out, "%-*s", label_w, "workload");
  for (size_t a = 0; a < t->n_allocs; a++) fprintf(out, " %*s", cell_w, t->allocs[a]);
  fputc('\n', out);
  for (size_t r = 0; r < t->n_rows; r++) {
    fprintf(out, "%-*s", label_w, t->rows[r].label);
    for (size_t a = 0; a < t->n_allocs; a++) fprintf(out, " %*s", cell_w, ratio_cell(t, r, a, 0, buf, sizeof buf));
    fputc('\n', out);
  }
  if (t->baseline >= 0) {
    summary_line(out, t, "geomean", label_w, cell_w, t->geo_time, t->geo_rss, t->geo_rows);
    summary_line(out, t, "geomean seed rows", label_w, cell_w, t->seed_time, t->seed_rss, t->seed_rows);
  }
}

int bench_write_markdown(const char *path, const bench_table_t *t, const bench_report_info_t *info) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  char buf[128];
  fprintf(f, "# Tessera allocator comparison\n\n");
  fprintf(f, "- Command: `%s`\n- Date: %s\n- Machine: %s\n", info->command, info->date, info->machine);
  if (t->baseline >= 0) fprintf(f, "- Baseline: %s\n", t->allocs[t->baseline]);
  fprintf(f, "\n## Ratios against the baseline\n\n");
  fprintf(f, "Each cell: median time ratio / median peak-RSS ratio (below 1.00 is better). "
             "The baseline column gives its own medians. %s `~` marks a ratio where "
             "either side's runs spread by more than 25%% of their median.\n\n", metric_text(t->metric));
  fprintf(f, "| workload |");
  for (size_t a = 0; a < t->n_allocs; a++) fprintf(f, " %s |", t->allocs[a]);
  fprintf(f, "\n|---|");
  for (size_t a = 0; a < t->n_allocs; a++) fprintf(f, "---:|");
  fputc('\n', f);
  for (size_t r = 0; r < t->n_rows; r++) {
    fprintf(f, "| %s |", t->rows[r].label);
    for (size_t a = 0; a < t->n_allocs; a++) fprintf(f, " %s |", ratio_cell(t, r, a, 1, buf, sizeof buf));
    fputc('\n', f);
  }
  if (t->baseline >= 0) {
    summary_row_md(f, t, "geomean", t->geo_time, t->geo_rss, t->geo_rows);
    summary_row_md(f, t, "geomean seed rows", t->seed_time, t->seed_rss, t->seed_rows);
  }
  fprintf(f, "\n## Medians and spread\n\n");
  fprintf(f, "Each cell: median time in seconds [min-max over the runs], median CPU seconds, median peak RSS in MiB; "
             "`ok/runs` when some runs did not complete.\n\n| workload |");
  for (size_t a = 0; a < t->n_allocs; a++) fprintf(f, " %s |", t->allocs[a]);
  fprintf(f, "\n|---|");
  for (size_t a = 0; a < t->n_allocs; a++) fprintf(f, "---:|");
  fputc('\n', f);
  for (size_t r = 0; r < t->n_rows; r++) {
    fprintf(f, "| %s |", t->rows[r].label);
    for (size_t a = 0; a < t->n_allocs; a++) {
      const bench_cell_t *c = bench_cell(t, r, a);
      if (c->runs == 0) fprintf(f, " - |");
      else if (c->skipped == c->runs) fprintf(f, " skipped |");
      else if (c->ok == 0) fprintf(f, " FAIL %s |", c->failure);
      else {
        fprintf(f, " %.3f [%.3f-%.3f], cpu %.3f, %.1f MiB", c->time.median, c->time.min, c->time.max,
                c->cpu.median, c->rss.median / 1024.0);
        if (c->ok != c->runs) fprintf(f, " (%d/%d ok, %s)", c->ok, c->runs, c->failure);
        fprintf(f, " |");
      }
    }
    fputc('\n', f);
  }

  int any_failure = 0;
  for (size_t r = 0; r < t->n_rows; r++)
    for (size_t a = 0; a < t->n_allocs; a++)
      if (bench_cell(t, r, a)->failure[0]) {
        if (!any_failure) fprintf(f, "\n## Failures\n\n");
        any_failure = 1;
        const bench_cell_t *c = bench_cell(t, r, a);
        fprintf(f, "- %s under %s: %s (%d of %d runs failed)\n", t->rows[r].label, t->allocs[a], c->failure,
                c->runs - c->ok - c->skipped, c->runs);
      }
  if (info->n_notes) {
    fprintf(f, "\n## Notes\n\n");
    for (size_t i = 0; i < info->n_notes; i++) fprintf(f, "- %s\n", info->notes[i]);
  }
  if (info->n_charts) {
    fprintf(f, "\n## Charts\n\n");
    for (size_t i = 0; i < info->n_charts; i++) fprintf(f, "![%s](%s)\n\n", info->charts[i], info->charts[i]);
  }
  fprintf(f, "\n## Method\n\n"
             "Every workload is a separate process; each allocator other than `system` is loaded with "
             "`LD_PRELOAD` into the same binary. Runs are interleaved (run r of every workload under "
             "every allocator, allocator order rotated) so machine drift hits all alike. CPU time and "
             "peak RSS come from `wait4`; wall time from the monotonic clock. Raw runs: `results.csv`, "
             "`results.json`; machine: `machine.txt`.\n");
  /* A write that failed before the last (a full disk, a file size limit)
   * sets the stream's error flag, which fclose does not report. */
  int failed = ferror(f);
  return fclose(f) == 0 && !failed ? 0 : -1;
}

/* Length of the well-formed UTF-8 sequence at s (1-4), or 0 when the bytes
 * there are not one (RFC 3629: no overlong forms, no surrogates, nothing
 * above U+10FFFF). */
static size_t utf8_sequence(const unsigned char *s) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0) return 0;
  unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
  if (c == 0xe0) lo = 0xa0;
  else if (c == 0xed) hi = 0x9f;
  else if (c == 0xf0) lo = 0x90;
  else if (c == 0xf4) hi = 0x8f;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  return n;
}

/* JSON is UTF-8 (RFC 8259): a path in the command or a note that is not
 * (a Latin-1 directory name) has each byte of a broken sequence written as
 * U+FFFD, or the whole document would be refused by a JSON reader. */
void bench_json_string(FILE *f, const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  fputc('"', f);
  while (*s) {
    unsigned char c = *s;
    size_t n = utf8_sequence(s);
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c == '\n') fputs("\\n", f);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else if (n == 0) fputs("\\ufffd", f);
    else {
      fwrite(s, 1, n, f);
      s += n;
      continue;
    }
    s++;
  }
  fputc('"', f);
}

static void json_number(FILE *f, double v) {
  if (isnan(v) || isinf(v)) fputs("null", f);
  else fprintf(f, "%.6g", v);
}

/* `, "key": {"median": m, "min": a, "max": b}` for one summary. */
static void json_spread(FILE *f, const char *key, const bench_summary_t *sum) {
  fprintf(f, ", \"%s\": {\"median\": ", key);
  json_number(f, sum->median);
  fprintf(f, ", \"min\": ");
  json_number(f, sum->min);
  fprintf(f, ", \"max\": ");
  json_number(f, sum->max);
  fputc('}', f);
}

int bench_write_json(const char *path, const bench_record_t *recs, size_t n, const bench_table_t *t,
                     const bench_report_info_t *info) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\n  \"command\": ");
  bench_json_string(f, info->command);
  fprintf(f, ",\n  \"date\": ");
  bench_json_string(f, info->date);
  fprintf(f, ",\n  \"machine\": ");
  bench_json_string(f, info->machine);
  fprintf(f, ",\n  \"metric\": ");
  bench_json_string(f, bench_metric_name(t->metric));
  fprintf(f, ",\n  \"baseline\": ");
  if (t->baseline >= 0) bench_json_string(f, t->allocs[t->baseline]);
  else fputs("null", f);
  fprintf(f, ",\n  \"notes\": [");
  for (size_t i = 0; i < info->n_notes; i++) {
    fputs(i ? ", " : "", f);
    bench_json_string(f, info->notes[i]);
  }
  fprintf(f, "],\n  \"summary\": [\n");
  int first = 1;
  for (size_t r = 0; r < t->n_rows; r++)
    for (size_t a = 0; a < t->n_allocs; a++) {
      const bench_cell_t *c = bench_cell(t, r, a);
      if (c->runs == 0) continue;
      fprintf(f, "%s    {\"workload\": ", first ? "" : ",\n");
      first = 0;
      bench_json_string(f, t->rows[r].workload);
      fprintf(f, ", \"threads\": %d, \"allocator\": ", t->rows[r].threads);
      bench_json_string(f, t->allocs[a]);
      fprintf(f, ", \"runs\": %d, \"ok\": %d, \"skipped\": %d, \"failure\": ", c->runs, c->ok, c->skipped);
      if (c->failure[0]) bench_json_string(f, c->failure);
      else fputs("null", f);
      json_spread(f, "time_s", &c->time);
      fprintf(f, ", \"cpu_s_median\": ");
      json_number(f, c->cpu.median);
      json_spread(f, "peak_rss_kib", &c->rss);
      fprintf(f, ", \"time_ratio\": ");
      json_number(f, c->time_ratio);
      fprintf(f, ", \"rss_ratio\": ");
      json_number(f, c->rss_ratio);
      fputc('}', f);
    }
  fprintf(f, "\n  ],\n  \"geomean\": {");
  for (size_t a = 0; a < t->n_allocs; a++) {
    fputs(a ? ", " : "", f);
    bench_json_string(f, t->allocs[a]);
    fprintf(f, ": {\"time_ratio\": ");
    json_number(f, t->geo_time[a]);
    fprintf(f, ", \"rss_ratio\": ");
    json_number(f, t->geo_rss[a]);
    fprintf(f, ", \"rows\": %zu, \"seed_time_ratio\": ", t->geo_rows[a]);
    json_number(f, t->seed_time[a]);
    fprintf(f, ", \"seed_rss_ratio\": ");
    json_number(f, t->seed_rss[a]);
    fprintf(f, ", \"seed_rows\": %zu}", t->seed_rows[a]);
  }
  fprintf(f, "},\n  \"runs\": [\n");
  for (size_t i = 0; i < n; i++) {
    const bench_record_t *r = &recs[i];
    fprintf(f, "    {\"workload\": ");
    bench_json_string(f, r->workload);
    fprintf(f, ", \"allocator\": ");
    bench_json_string(f, r->allocator);
    fprintf(f, ", \"threads\": %d, \"run\": %d, \"wall_s\": ", r->threads, r->run);
    json_number(f, r->wall_s);
    fprintf(f, ", \"cpu_s\": ");
    json_number(f, r->cpu_s);
    fprintf(f, ", \"user_s\": ");
    json_number(f, r->user_s);
    fprintf(f, ", \"sys_s\": ");
    json_number(f, r->sys_s);
    fprintf(f, ", \"work_s\": ");
    json_number(f, r->work_s);
    fprintf(f, ", \"peak_rss_kib\": ");
    if (r->peak_rss_kib >= 0) fprintf(f, "%ld", r->peak_rss_kib);
    else fputs("null", f);
    fprintf(f, ", \"status\": ");
    bench_json_string(f, r->status);
    fprintf(f, ", \"metrics\": {");
    /* extra is key=value;key=value with numeric values */
    char extra[BENCH_EXTRA_MAX];
    snprintf(extra, sizeof extra, "%s", r->extra);
    int k = 0;
    for (char *save = NULL, *item = strtok_r(extra, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
      char *eq = strchr(item, '=');
      if (!eq) continue;
      *eq = '\0';
      char *end;
      double v = strtod(eq + 1, &end);
      fputs(k++ ? ", " : "", f);
      bench_json_string(f, item);
      fputs(": ", f);
      if (*end == '\0' && end != eq + 1) json_number(f, v);
      else bench_json_string(f, eq + 1);
    }
    fprintf(f, "}}%s\n", i + 1 < n ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  /* A write that failed before the last (a full disk, a file size limit)
   * sets the stream's error flag, which fclose does not report. */
  int failed = ferror(f);
  return fclose(f) == 0 && !failed ? 0 : -1;
}
