/* results.csv writer and reader (see bench_results.h). The writer is called
 * by tools/cmd_bench.c after every run, so a crash of the runner still
 * leaves the runs so far on disk; the reader serves `--from DIR` and the
 * unit tests. Numbers are written with enough digits to round-trip the
 * precision that matters (microseconds, KiB). */
#include "bench_results.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int bench_valid_name(const char *s) {
  size_t n = 0;
  for (; s[n]; n++) {
    unsigned char c = (unsigned char)s[n];
    if (!(isalnum(c) || c == '_' || c == '.' || c == '+' || c == '-' || c == '@')) return 0;
  }
  return n > 0 && n < BENCH_NAME_MAX;
}

double bench_record_time(const bench_record_t *r) {
  return isnan(r->work_s) ? r->wall_s : r->work_s;
}

double bench_record_metric(const bench_record_t *r, bench_metric_t metric) {
  switch (metric) {
    case BENCH_METRIC_WALL: return r->wall_s;
    case BENCH_METRIC_CPU: return r->cpu_s;
    case BENCH_METRIC_WORK: break;
  }
  return bench_record_time(r);
}

const char *bench_metric_name(bench_metric_t metric) {
  return metric == BENCH_METRIC_WALL ? "wall" : metric == BENCH_METRIC_CPU ? "cpu" : "work";
}

int bench_metric_parse(const char *name, bench_metric_t *metric) {
  if (!strcmp(name, "work")) *metric = BENCH_METRIC_WORK;
  else if (!strcmp(name, "wall")) *metric = BENCH_METRIC_WALL;
  else if (!strcmp(name, "cpu")) *metric = BENCH_METRIC_CPU;
  else return -1;
  return 0;
}

int bench_record_ok(const bench_record_t *r) { return strcmp(r->status, "ok") == 0; }

void bench_csv_write_header(FILE *out) { fprintf(out, "%s\n", BENCH_CSV_HEADER); }

static void write_double(FILE *out, double v) {
  if (!isnan(v)) fprintf(out, "%.6f", v);
}

void bench_csv_write(FILE *out, const bench_record_t *r) {
  fprintf(out, "%s,%s,%d,%d,", r->workload, r->allocator, r->threads, r->run);
  write_double(out, r->wall_s);
  fputc(',', out);
  write_double(out, r->cpu_s);
  fputc(',', out);
  if (r->peak_rss_kib >= 0) fprintf(out, "%ld", r->peak_rss_kib);
  fprintf(out, ",%s,", r->status);
  write_double(out, r->user_s);
  fputc(',', out);
  write_double(out, r->sys_s);
  fputc(',', out);
  write_double(out, r->work_s);
  fprintf(out, ",%s\n", r->extra);
  fflush(out);
}

/* Splits line at commas into at most max fields (in place); returns the count. */
static int split_fields(char *line, char **field, int max) {
  int n = 0;
  char *p = line;
  for (;;) {
    if (n == max) return max + 1;
    field[n++] = p;
    char *comma = strchr(p, ',');
    if (!comma) break;
    *comma = '\0';
    p = comma + 1;
  }
  return n;
}

/* Empty field -> NAN; otherwise a finite non-negative number or an error. */
static int parse_double(const char *s, double *out) {
  if (*s == '\0') {
    *out = NAN;
    return 0;
  }
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (*end || errno || !isfinite(v) || v < 0) return -1;
  *out = v;
  return 0;
}

static int parse_long(const char *s, long min, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end || errno || v < min) return -1;
  *out = v;
  return 0;
}

static int valid_status(const char *s) {
  if (!strcmp(s, "ok") || !strcmp(s, "timeout") || !strcmp(s, "skipped") || !strcmp(s, "error")) return 1;
  if (!strncmp(s, "exit:", 5)) {
    long code;
    return parse_long(s + 5, 0, &code) == 0 && code <= 255;
  }
  if (!strncmp(s, "signal:", 7)) {
    if (!s[7]) return 0;
    for (const char *c = s + 7; *c; c++)
      if (!isalnum((unsigned char)*c)) return 0;
    return 1;
  }
  return 0;
}

const char *bench_csv_parse_line(const char *line, bench_record_t *r) {
  char buf[2048];
  size_t len = strlen(line);
  while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
  if (len >= sizeof buf) return "line too long";
  memcpy(buf, line, len);
  buf[len] = '\0';
  char *f[12];
  int n = split_fields(buf, f, 12);
  if (n != 12) return "expected 12 comma-separated fields";
  memset(r, 0, sizeof *r);
  if (!bench_valid_name(f[0])) return "bad workload name";
  if (!bench_valid_name(f[1])) return "bad allocator name";
  /* bench_valid_name bounded both below BENCH_NAME_MAX: a plain copy fits. */
  memcpy(r->workload, f[0], strlen(f[0]) + 1);
  memcpy(r->allocator, f[1], strlen(f[1]) + 1);
  long v;
  if (parse_long(f[2], 1, &v) || v > 4096) return "threads is not an integer in 1..4096";
  r->threads = (int)v;
  if (parse_long(f[3], 1, &v) || v > 1000000) return "run is not a positive integer";
  r->run = (int)v;
  if (parse_double(f[4], &r->wall_s)) return "wall_s is not a non-negative number";
  if (parse_double(f[5], &r->cpu_s)) return "cpu_s is not a non-negative number";
  if (f[6][0] == '\0') r->peak_rss_kib = -1;
  else if (parse_long(f[6], 0, &r->peak_rss_kib)) return "peak_rss_kib is not a non-negative integer";
  if (!valid_status(f[7])) return "unknown status (ok, exit:N, signal:NAME, timeout, skipped, error)";
  snprintf(r->status, sizeof r->status, "%s", f[7]);
  if (parse_double(f[8], &r->user_s)) return "user_s is not a non-negative number";
  if (parse_double(f[9], &r->sys_s)) return "sys_s is not a non-negative number";
  if (parse_double(f[10], &r->work_s)) return "work_s is not a non-negative number";
  if (strlen(f[11]) >= sizeof r->extra) return "extra field too long";
  if (strchr(f[11], '"')) return "extra field contains a quote";
  snprintf(r->extra, sizeof r->extra, "%s", f[11]);
  if (bench_record_ok(r) && (isnan(r->wall_s) || r->peak_rss_kib < 0))
    return "an ok run must have wall_s and peak_rss_kib";
  return NULL;
}

int bench_csv_read(const char *path, bench_record_t **out, size_t *count, char *err, size_t err_len) {
  *out = NULL;
  *count = 0;
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  /* fopen takes a directory, whose reading then fails: say what it is
   * rather than "empty file". */
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && !S_ISREG(st.st_mode)) {
    snprintf(err, err_len, "%s: %s, not a results file", path,
             S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    fclose(f);
    return -1;
  }
  char line[2048];
  long lineno = 0;
  size_t cap = 0;
  bench_record_t *recs = NULL;
  int rc = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    if (!strchr(line, '\n') && !feof(f)) {
      snprintf(err, err_len, "%s:%ld: line too long", path, lineno);
      rc = -1;
      break;
    }
    if (lineno == 1) {
      size_t len = strcspn(line, "\r\n");
      if (len != strlen(BENCH_CSV_HEADER) || strncmp(line, BENCH_CSV_HEADER, len)) {
        snprintf(err, err_len, "%s:1: header is not '%s'", path, BENCH_CSV_HEADER);
        rc = -1;
        break;
      }
      continue;
    }
    if (line[strspn(line, " \t\r\n")] == '\0') continue; /* blank line */
    if (*count == cap) {
      cap = cap ? cap * 2 : 64;
      bench_record_t *grown = realloc(recs, cap * sizeof *recs);
      if (!grown) {
        snprintf(err, err_len, "%s:%ld: out of memory", path, lineno);
        rc = -1;
        break;
      }
      recs = grown;
    }
    const char *problem = bench_csv_parse_line(line, &recs[*count]);
    if (problem) {
      snprintf(err, err_len, "%s:%ld: %s", path, lineno, problem);
      rc = -1;
      break;
    }
    (*count)++;
  }
  if (rc == 0 && lineno == 0) {
    snprintf(err, err_len, "%s:1: empty file (no header)", path);
    rc = -1;
  }
  fclose(f);
  if (rc) {
    free(recs);
    *count = 0;
    return -1;
  }
  *out = recs;
  return 0;
}
