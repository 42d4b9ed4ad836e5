/* cmd_bench.c — `tessera bench`: the allocator comparison suite.
 *
 *   tessera bench [--quick|--full] [--allocators a,b] [--workloads x,y]
 *                 [--runs N] [--baseline NAME] [--allocator NAME=PATH.so]
 *                 [--threads N,M] [--scale F] [--timeout S] [--no-charts]
 *                 [--out DIR] [--list] [--from DIR] [--metric work|wall|cpu]
 *
 * This file is the orchestration only: it turns the catalog
 * (bench/runner/bench_catalog.c) into rows — one per workload and thread
 * count, one per trace set — chooses the allocators, and runs the schedule
 * run by run: for run r, for each row, every allocator once, the allocator
 * order rotated by r and the row index, so drift of the machine hits every
 * allocator alike. Each run is a separate process (bench_proc.c); its record
 * goes to results.csv at once, so an interrupted suite leaves what it
 * measured. The report (table, report.md, results.json) is built from
 * results.csv as read back, and the charts are drawn by bench/plot.py with
 * matplotlib from the project-local .venv, which this command creates on
 * first use (python3 -m venv + pip; no root).
 *
 * Results go to DIR/<UTC timestamp>/ (DIR defaults to ./bench-results) and
 * DIR/latest points at the newest. `--from DIR` rebuilds DIR's reports from
 * its results.csv: every record, under another --baseline, --metric or
 * --no-charts, in DIR or, with --out OUT, in OUT (DIR left as it was); an
 * option that only shapes a run, or a baseline absent from the records, is
 * a usage error there. Exit status: 0 when the suite ran
 * (failed runs are results, shown in the report), 2 for a usage error, 1
 * when the results could not be read or written. */
#define _GNU_SOURCE
#include "commands.h"
#include "preload.h"

#include "bench_catalog.h"
#include "bench_machine.h"
#include "bench_proc.h"
#include "bench_report.h"
#include "bench_results.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ALLOCS 16
#define MAX_ROWS 128
#define MAX_NOTES 64
#define MAX_TRACE_FILES 256

typedef struct bench_config_s {
  int runs;
  double scale;
  double timeout_s;
  int quick;
  int charts;
  int thread_list[8];
  int n_threads;            /* 0 = derive from the cores */
  const char *allocators;   /* comma list or NULL */
  const char *workloads;    /* comma list or NULL */
  const char *baseline;
  const char *out_root;
  int out_given;            /* --out was given: with --from, where the rebuilt report goes */
  const char *from_dir;
  int list;
  bench_metric_t metric;
  int baseline_given;
  const char *run_option;   /* first option given that only matters when running */
  bench_allocator_t custom[MAX_ALLOCS];
  size_t n_custom;
} bench_config_t;

/* One line of the schedule: a workload at one thread count with its argv. */
typedef struct bench_job_s {
  const bench_workload_t *workload;
  char name[BENCH_NAME_MAX];  /* the CSV's workload column */
  char label[BENCH_NAME_MAX + 16];
  int threads;
  char *argv[MAX_TRACE_FILES + 16];
  int argc;
  int dropped;                /* skipped by the program itself: not run again */
  int generate;               /* trace row waiting for generated traces */
} bench_job_t;

static char *notes[MAX_NOTES];
static size_t n_notes;

/* Notes end up in report.md and results.json; `skip` ones say what did not
 * run and how to get it, `info` ones anything else worth knowing. */
static void add_line(const char *kind, const char *fmt, va_list ap) {
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  printf("  %s: %s\n", kind, buf);
  if (n_notes < MAX_NOTES) notes[n_notes++] = strdup(buf);
}

static void add_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  add_line("skip", fmt, ap);
  va_end(ap);
}

static void add_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add_info(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  add_line("note", fmt, ap);
  va_end(ap);
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: tessera bench [OPTIONS]\n"
          "\n"
          "Compares malloc implementations on the same workload programs, each\n"
          "allocator loaded with LD_PRELOAD: the system allocator, libtessera and\n"
          "every installed peer (jemalloc, tcmalloc, mimalloc).\n"
          "\n"
          "  --quick              smoke run: 1 run, small sizes, 1x-cores threads (< 1 min)\n"
          "  --full               5 runs, 3x the default sizes (not with --quick)\n"
          "  --runs N             runs of every (workload, allocator) pair (default 3)\n"
          "  --allocators a,b,c   allocators to compare (default: all available)\n"
          "  --allocator NAME=SO  add (or replace) an allocator given by its shared object\n"
          "                       (an ELF shared object at a path without spaces or colons;\n"
          "                       each NAME once, at most 16 allocators in all)\n"
          "  --baseline NAME      ratios are against this allocator (default: system)\n"
          "  --workloads x,y      workloads or groups to run (see --list; default: all)\n"
          "  --threads N,M        thread counts for multi-threaded workloads\n"
          "                       (default: 1, 2 and 4 times the cores)\n"
          "  --scale F            multiply every workload's size by F\n"
          "  --timeout S          seconds before a run is killed (default 120)\n"
          "  --no-charts          do not draw PNG charts\n"
          "  --out DIR            results root (default: bench-results); results go to\n"
          "                       DIR/<timestamp>/ and DIR/latest points at them\n"
          "  --from DIR           rebuild the report of DIR/results.csv, run nothing; with\n"
          "                       it only --baseline, --metric, --no-charts and --out apply.\n"
          "                       The report is rewritten in DIR, or, with --out OUT, written\n"
          "                       to OUT (with copies of the raw files) and DIR is left alone\n"
          "  --metric M           time the ratios compare: work (the workload's measured\n"
          "                       region, else wall; default), wall, or cpu (user+sys)\n"
          "  --list               list workloads, allocators and trace sets (not with --from)\n"
          "Environment: TESSERA_TRACES_DIR, TESSERA_SOURCE_DIR, TESSERA_BENCH_VENV (docs/USAGE.md)\n");
}

/* ---- option parsing ---------------------------------------------------- */

static int parse_positive(const char *opt, const char *v, double min, double max, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (*v == '\0' || *end || errno || !(d >= min && d <= max)) {
    fprintf(stderr, "tessera bench: %s wants a number in %g..%g, not '%s'\n", opt, min, max, v);
    return -1;
  }
  *out = d;
  return 0;
}

/* A whole number in min..max (--runs, one of --threads' counts). */
static int parse_whole(const char *opt, const char *v, int min, int max, int *out) {
  double d;
  if (parse_positive(opt, v, min, max, &d)) return -1;
  if (d != floor(d)) {
    fprintf(stderr, "tessera bench: %s wants a whole number in %d..%d, not '%s'\n", opt, min, max, v);
    return -1;
  }
  *out = (int)d;
  return 0;
}

/* --threads N,M: up to 8 counts, none empty ('' and '2,,4' are errors, not
 * the default counts). */
static int parse_threads(const char *v, bench_config_t *c) {
  c->n_threads = 0;
  for (const char *p = v;; p++) {
    size_t n = strcspn(p, ",");
    char tok[64];
    if (n == 0 || n >= sizeof tok) {
      fprintf(stderr, "tessera bench: --threads wants thread counts separated by commas (e.g. 2,4), not '%s'\n", v);
      return -1;
    }
    if (c->n_threads == 8) {
      fprintf(stderr, "tessera bench: at most 8 thread counts\n");
      return -1;
    }
    snprintf(tok, sizeof tok, "%.*s", (int)n, p);
    if (parse_whole("--threads", tok, 1, 1024, &c->thread_list[c->n_threads])) return -1;
    /* A count twice would run its row twice per run, recorded as the same
     * run number, and the report would count twice the runs asked for. */
    for (int i = 0; i < c->n_threads; i++)
      if (c->thread_list[i] == c->thread_list[c->n_threads]) {
        fprintf(stderr, "tessera bench: --threads '%s' names %d twice\n", v, c->thread_list[i]);
        return -1;
      }
    c->n_threads++;
    p += n;
    if (!*p) return 0;
  }
}

/* Options that only shape a run of the suite; --from runs nothing, so they
 * would be silently ignored there (the report covers every record). */
static int only_for_running(const char *opt) {
  static const char *const names[] = {"--quick", "--full", "--runs", "--scale", "--timeout", "--allocators",
                                      "--workloads", "--threads", "--allocator"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(opt, names[i])) return 1;
  return 0;
}

/* Options that take one value. Given twice, only the last counted,
 * silently: --from A --from B reported B alone (a merge of both may well have
 * been meant), --baseline a --baseline b showed b's ratios under a command
 * line that names a first. Returns 1 after the message when OPT was seen
 * before; FIRST holds each option's first value. */
static const char *const single_value_options[] = {"--runs",    "--scale",    "--timeout", "--allocators",
                                                   "--workloads", "--baseline", "--metric",  "--threads",
                                                   "--out",     "--from"};
#define N_SINGLE_VALUE_OPTIONS (sizeof single_value_options / sizeof single_value_options[0])

static int given_twice(const char *opt, const char *value, const char *first[N_SINGLE_VALUE_OPTIONS]) {
  for (size_t i = 0; i < N_SINGLE_VALUE_OPTIONS; i++) {
    if (strcmp(opt, single_value_options[i])) continue;
    if (first[i]) {
      fprintf(stderr, "tessera bench: %s is given twice ('%s' and '%s')\n", opt, first[i], value);
      return 1;
    }
    first[i] = value;
    return 0;
  }
  return 0;
}

static int parse_args(int argc, char **argv, bench_config_t *c) {
  memset(c, 0, sizeof *c);
  c->runs = 3;
  c->scale = 1.0;
  c->timeout_s = 120;
  c->charts = 1;
  c->baseline = "system";
  c->out_root = "bench-results";
  int runs_given = 0, scale_given = 0;
  const char *first_values[N_SINGLE_VALUE_OPTIONS] = {0};
  const char *size_option = NULL;  /* --quick or --full, whichever came first */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    double d;
    /* --name=value, as `tessera lab` and `tessera run` take it (getopt):
     * --runs=3 was "unknown option --runs=3" here alone. */
    char name[32];
    const char *eq = !strncmp(a, "--", 2) ? strchr(a, '=') : NULL;
    int inline_value = eq && (size_t)(eq - a) < sizeof name;
    if (inline_value) {
      snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
      a = name;
      v = eq + 1;
    }
    if (!c->run_option && only_for_running(a)) c->run_option = argv[i];
    if (inline_value && (!strcmp(a, "--help") || !strcmp(a, "--quick") || !strcmp(a, "--full") ||
                         !strcmp(a, "--list") || !strcmp(a, "--no-charts"))) {
      fprintf(stderr, "tessera bench: %s takes no value, not '%s'\n", a, v);
      return -1;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(tessera_stdout_status(0));
    } else if (!strcmp(a, "--quick") || !strcmp(a, "--full")) {
      if (size_option && strcmp(size_option, a)) {
        fprintf(stderr, "tessera bench: --quick and --full exclude each other\n");
        return -1;
      }
      size_option = a;
      c->quick = !strcmp(a, "--quick") ? 1 : -1;
    } else if (!strcmp(a, "--list")) {
      c->list = 1;
    } else if (!strcmp(a, "--no-charts")) {
      c->charts = 0;
    } else if (!v) {
      fprintf(stderr, "tessera bench: unknown option or missing value: %s\n", a);
      usage(stderr);
      return -1;
    } else {
      if (!inline_value) i++;
      if (given_twice(a, v, first_values)) return -1;
      if (!strcmp(a, "--runs")) {
        if (parse_whole(a, v, 1, 1000, &c->runs)) return -1;
        runs_given = 1;
      } else if (!strcmp(a, "--scale")) {
        if (parse_positive(a, v, 0.001, 1000, &d)) return -1;
        c->scale = d;
        scale_given = 1;
      } else if (!strcmp(a, "--timeout")) {
        if (parse_positive(a, v, 1, 86400, &c->timeout_s)) return -1;
      } else if (!strcmp(a, "--allocators")) {
        c->allocators = v;
      } else if (!strcmp(a, "--workloads")) {
        c->workloads = v;
      } else if (!strcmp(a, "--baseline")) {
        c->baseline = v;
        c->baseline_given = 1;
      } else if (!strcmp(a, "--out") || !strcmp(a, "--from")) {
        /* '' would be the root: --from '' read /results.csv (and would
         * rewrite /report.md), --out '' made directories from whatever
         * followed the empty string in make_dirs' buffer. */
        if (!*v) {
          fprintf(stderr, "tessera bench: %s needs a directory, not ''\n", a);
          return -1;
        }
        if (!strcmp(a, "--out")) {
          c->out_root = v;
          c->out_given = 1;
        } else {
          c->from_dir = v;
        }
      } else if (!strcmp(a, "--metric")) {
        if (bench_metric_parse(v, &c->metric)) {
          fprintf(stderr, "tessera bench: --metric wants work, wall or cpu, not '%s'\n", v);
          return -1;
        }
      } else if (!strcmp(a, "--threads")) {
        if (parse_threads(v, c)) return -1;
      } else if (!strcmp(a, "--allocator")) {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1] || c->n_custom == MAX_ALLOCS) {
          fprintf(stderr, "tessera bench: --allocator wants NAME=PATH.so, not '%s'\n", v);
          return -1;
        }
        bench_allocator_t *al = &c->custom[c->n_custom++];
        memset(al, 0, sizeof *al);
        snprintf(al->name, sizeof al->name, "%.*s", (int)(eq - v), v);
        snprintf(al->path, sizeof al->path, "%s", eq + 1);
        if (!bench_valid_name(al->name)) {
          fprintf(stderr, "tessera bench: allocator name '%s' may only use letters, digits and _.+-\n", al->name);
          return -1;
        }
        al->available = 1;  /* checked by check_custom_allocators */
      } else {
        fprintf(stderr, "tessera bench: unknown option %s\n", a);
        usage(stderr);
        return -1;
      }
    }
  }
  if (c->from_dir && c->list) {
    /* --list would print the catalog and ignore --from. */
    fprintf(stderr, "tessera bench: --list and --from exclude each other\n");
    return -1;
  }
  if (c->quick == 1) {
    if (!runs_given) c->runs = 1;
    if (!scale_given) c->scale = 0.05;
    if (c->timeout_s == 120) c->timeout_s = 60;
  } else if (c->quick == -1) {
    if (!runs_given) c->runs = 5;
    if (!scale_given) c->scale = 3.0;
    if (c->timeout_s == 120) c->timeout_s = 600;
  }
  return 0;
}

/* --allocator NAME=PATH: PATH must be what `tessera run` would preload (an
 * ELF shared object, at a path the loader does not split), else the rows
 * labelled NAME would really be glibc's. Stored as an absolute path. Returns
 * 0, or -1 after a usage message. */
static int check_custom_allocators(bench_config_t *c) {
  /* Every name once, and room for all: a second NAME= silently replaced the
   * first, and a name past MAX_ALLOCS in all was silently dropped (then
   * "unknown allocator" when --allocators named it). */
  bench_allocator_t known[MAX_ALLOCS];
  size_t n_builtin = bench_known_allocators(tessera_self_dir(), known, MAX_ALLOCS), n_all = n_builtin;
  for (size_t i = 0; i < c->n_custom; i++) {
    for (size_t j = 0; j < i; j++)
      if (!strcmp(c->custom[j].name, c->custom[i].name)) {
        fprintf(stderr, "tessera bench: --allocator %s is given twice\n", c->custom[i].name);
        return -1;
      }
    size_t k = 0;
    while (k < n_builtin && strcmp(known[k].name, c->custom[i].name)) k++;
    if (k == n_builtin && ++n_all > MAX_ALLOCS) {
      fprintf(stderr, "tessera bench: too many allocators: at most %d in all, the %zu built in included\n",
              MAX_ALLOCS, n_builtin);
      return -1;
    }
  }
  for (size_t i = 0; i < c->n_custom; i++) {
    bench_allocator_t *al = &c->custom[i];
    char resolved[PATH_MAX];
    if (!preload_resolve(al->path, resolved, sizeof resolved)) {
      fprintf(stderr, "tessera bench: --allocator %s=%s: cannot read %s: %s\n", al->name, al->path, al->path,
              strerror(errno));
      return -1;
    }
    const char *why = preload_problem(resolved);
    if (why) {
      fprintf(stderr, "tessera bench: --allocator %s=%s: %s cannot be preloaded: %s\n", al->name, al->path,
              resolved, why);
      return -1;
    }
    snprintf(al->path, sizeof al->path, "%s", resolved);
  }
  return 0;
}

/* 1 when name is in the comma-separated list. */
static int in_list(const char *list, const char *name) {
  size_t len = strlen(name);
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ",");
    if (n == len && !strncmp(p, name, n)) return 1;
    p += n;
    if (*p == ',') p++;
  }
  return 0;
}

/* ---- allocators -------------------------------------------------------- */

/* The built-in allocators with the --allocator ones merged in: one of a
 * built-in name replaces it, the others join (a run and --list alike). */
static size_t merged_allocators(const bench_config_t *c, bench_allocator_t known[MAX_ALLOCS]) {
  size_t n_known = bench_known_allocators(tessera_self_dir(), known, MAX_ALLOCS);
  for (size_t i = 0; i < c->n_custom; i++) {
    size_t k = 0;
    while (k < n_known && strcmp(known[k].name, c->custom[i].name)) k++;
    if (k == n_known && n_known < MAX_ALLOCS) n_known++;
    if (k < n_known) known[k] = c->custom[i];
  }
  return n_known;
}

static size_t choose_allocators(const bench_config_t *c, bench_allocator_t *out) {
  bench_allocator_t known[MAX_ALLOCS];
  size_t n_known = merged_allocators(c, known);
  if (c->allocators) {
    for (const char *p = c->allocators; *p;) {
      size_t n = strcspn(p, ",");
      int found = 0;
      for (size_t k = 0; k < n_known; k++)
        if (strlen(known[k].name) == n && !strncmp(known[k].name, p, n)) found = 1;
      if (!found) {
        fprintf(stderr, "tessera bench: unknown allocator '%.*s' (see --list, or give --allocator NAME=PATH.so)\n",
                (int)n, p);
        return (size_t)-1;
      }
      p += n;
      if (*p == ',') p++;
    }
  }
  size_t n = 0;
  for (size_t k = 0; k < n_known; k++) {
    if (c->allocators && !in_list(c->allocators, known[k].name)) continue;
    if (!known[k].available) {
      add_note("allocator %s: %s not found; %s", known[k].name, known[k].path,
               known[k].install_hint ? known[k].install_hint : "");
      continue;
    }
    /* A found library the loader would skip (libtessera.so in a build
     * directory whose path has a space): its rows would be glibc's. */
    const char *why = known[k].path[0] ? preload_problem(known[k].path) : NULL;
    if (why) {
      add_note("allocator %s: %s cannot be preloaded: %s", known[k].name, known[k].path, why);
      continue;
    }
    out[n++] = known[k];
  }
  return n;
}

/* ---- rows -------------------------------------------------------------- */

static int selected(const bench_config_t *c, const bench_workload_t *w, const char *row_name) {
  if (!c->workloads) return 1;
  return in_list(c->workloads, w->name) || in_list(c->workloads, w->group) || in_list(c->workloads, row_name);
}

static void job_arg(bench_job_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_arg(bench_job_t *j, const char *fmt, ...) {
  char buf[PATH_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (j->argc < (int)(sizeof j->argv / sizeof j->argv[0]) - 1) j->argv[j->argc++] = strdup(buf);
  j->argv[j->argc] = NULL;
}

static int thread_counts(const bench_config_t *c, bench_threading_t t, int *out) {
  int cores = bench_cpu_count();
  if (t == BENCH_THREADS_NONE) {
    out[0] = 1;
    return 1;
  }
  if (t == BENCH_THREADS_CORES) {
    out[0] = cores;
    return 1;
  }
  if (c->n_threads) {
    memcpy(out, c->thread_list, (size_t)c->n_threads * sizeof(int));
    return c->n_threads;
  }
  if (c->quick == 1) {
    out[0] = cores;
    return 1;
  }
  out[0] = cores;
  out[1] = 2 * cores;
  out[2] = 4 * cores;
  return 3;
}

static void add_trace_files(bench_job_t *j, const char *dir) {
  char *files[MAX_TRACE_FILES];
  size_t total;
  size_t n_files = bench_trace_files(dir, files, MAX_TRACE_FILES, &total);
  if (total > n_files)
    add_note("%s: %zu trace files; only the first %zu by name are replayed", dir, total, n_files);
  for (size_t f = 0; f < n_files; f++) {
    job_arg(j, "%s", files[f]);
    free(files[f]);
  }
}

/* Runs argv[0] (searched in PATH) with argv, no shell: paths from --out or
 * the environment go through as they are, quotes and all. stdout and stderr
 * go to log (appended when append, else truncated), or, with log NULL,
 * stdout stays ours and stderr goes to /dev/null. Returns the exit status,
 * 128 when killed by a signal, -1 when it could not be started. */
static int run_command(char *const argv[], const char *log, int append) {
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa)) return -1;
  int rc = log ? posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC),
                                                  0644) ||
                     posix_spawn_file_actions_adddup2(&fa, 1, 2)
               : posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  extern char **environ;
  fflush(stdout);
  if (rc == 0) rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Without ../shared/traces the trace row replays what `tessera lab gen all`
 * writes (the lab's seeded stress patterns) into the results directory. */
static void generate_traces(bench_job_t *j, const char *dir) {
  char out[PATH_MAX + 32], self[PATH_MAX + 16], log[PATH_MAX + 32];
  snprintf(out, sizeof out, "%s/generated-traces", dir);
  snprintf(log, sizeof log, "%s/generated-traces.log", dir);
  snprintf(self, sizeof self, "%s/tessera", tessera_self_dir());
  char *argv[] = {self, "lab", "gen", "-o", out, "all", NULL};
  if (mkdir(out, 0755) == 0 && run_command(argv, log, 0) == 0) {
    int before = j->argc;
    add_trace_files(j, out);
    if (j->argc > before) {
      printf("traces: no trace set in %s; replaying the lab's generated traces (%d files in %s)\n",
             bench_traces_root(), j->argc - before, out);
      return;
    }
  }
  j->dropped = 1;
  add_note("traces: no trace set in %s and `tessera lab gen all` failed (see %s)", bench_traces_root(), log);
}

/* A trace-replay row: the replay program and the *.rep files of dir (none
 * yet when dir is NULL: generated later). Returns 1 when the row exists. */
static int add_trace_job(const bench_config_t *c, const bench_workload_t *w, const char *name, const char *dir,
                         bench_job_t *j) {
  char prog[PATH_MAX];
  memset(j, 0, sizeof *j);
  if (!bench_workload_program(tessera_self_dir(), w, prog, sizeof prog)) {
    add_note("%s: program %s not built", name, w->program);
    return 0;
  }
  j->workload = w;
  snprintf(j->name, sizeof j->name, "%s", name);
  snprintf(j->label, sizeof j->label, "%s", name);
  j->threads = 1;
  job_arg(j, "%s", prog);
  job_arg(j, "--scale");
  job_arg(j, "%g", c->scale);
  if (dir) add_trace_files(j, dir);
  return 1;
}

/* The row name of a trace set, traces-<set>, into name; returns 0 when the
 * set cannot have one: a character the results files do not allow (a
 * space: the set was listed by --list and silently not run), or a name too
 * long for a row (it was cut at 50 bytes, so two sets sharing those merged
 * into one row of the report). */
static int trace_row_name(const char *set_dir, char *name, size_t len) {
  const char *set = strrchr(set_dir, '/') ? strrchr(set_dir, '/') + 1 : set_dir;
  return snprintf(name, len, "traces-%s", set) < (int)len && bench_valid_name(name);
}

static size_t build_jobs(const bench_config_t *c, bench_job_t *jobs) {
  size_t n = 0;
  const char *bin = tessera_self_dir();
  for (size_t i = 0; i < bench_workload_count; i++) {
    const bench_workload_t *w = &bench_workloads[i];
    if (w->source == BENCH_SRC_TRACES) {
      char sets[16][PATH_MAX];
      size_t n_sets = bench_trace_sets(sets, 16);
      int any_selected = selected(c, w, w->name);
      for (size_t s = 0; s < n_sets; s++) {
        char name[BENCH_NAME_MAX];
        if (!trace_row_name(sets[s], name, sizeof name)) {
          if (any_selected)
            add_note("trace set %s: not run: its row, traces-<set>, takes at most %d letters, digits and "
                     "_.+-@ (rename the directory)", sets[s], BENCH_NAME_MAX - 8);
          continue;
        }
        if (!(any_selected || selected(c, w, name)) || n == MAX_ROWS) continue;
        if (add_trace_job(c, w, name, sets[s], &jobs[n])) n++;
      }
      /* No shared sets: the lab's generated traces, made once the results
       * directory exists (see generate_traces). */
      if (n_sets == 0 && (any_selected || selected(c, w, "traces-generated")) && n < MAX_ROWS &&
          add_trace_job(c, w, "traces-generated", NULL, &jobs[n])) {
        jobs[n].generate = 1;
        n++;
      }
      continue;
    }
    if (!selected(c, w, w->name)) continue;
    char prog[PATH_MAX];
    if (!bench_workload_program(bin, w, prog, sizeof prog)) {
      if (w->source == BENCH_SRC_FIT)
        add_note("%s: %s not built (bench/fit/ provides the fit workloads)", w->name, w->program);
      else
        add_note("%s: program %s not found next to %s", w->name, w->program, bin);
      continue;
    }
    int counts[8];
    int n_counts = thread_counts(c, w->threading, counts);
    for (int t = 0; t < n_counts && n < MAX_ROWS; t++) {
      bench_job_t *j = &jobs[n++];
      memset(j, 0, sizeof *j);
      j->workload = w;
      j->threads = counts[t];
      snprintf(j->name, sizeof j->name, "%s", w->name);
      /* One thread is labelled as the report's rows are (bench_report.c),
       * which cannot tell a threaded workload's record from another's. */
      if (w->threading == BENCH_THREADS_NONE || counts[t] == 1) snprintf(j->label, sizeof j->label, "%s", w->name);
      else snprintf(j->label, sizeof j->label, "%s/%dt", w->name, counts[t]);
      job_arg(j, "%s", prog);
      if (w->source == BENCH_SRC_FIT) {
        long iters = (long)((double)w->fit_iters * c->scale + 0.5);
        job_arg(j, "--impl");
        job_arg(j, "malloc");
        job_arg(j, "--iters");
        job_arg(j, "%ld", iters > 0 ? iters : 1);
        continue;
      }
      job_arg(j, "--scale");
      job_arg(j, "%g", c->scale);
      job_arg(j, "--threads");
      job_arg(j, "%d", counts[t]);
      if (w->mode) {
        job_arg(j, "--mode");
        job_arg(j, "%s", w->mode);
      }
    }
  }
  return n;
}

/* ---- one run ----------------------------------------------------------- */

/* Takes one key=value token of a workload's output into the record. Only
 * numeric values are kept. work_s (or time_s, the name the bench/fit
 * programs use) is the measured region; override_cpu_s and
 * override_peak_rss_kib replace the process figures (redis: the server's). */
static void absorb_token(const char *token, size_t len, bench_record_t *r, size_t *used) {
  char key[64], val[64];
  const char *eq = memchr(token, '=', len);
  if (!eq || eq == token || (size_t)(eq - token) >= sizeof key || len - (size_t)(eq - token) - 1 >= sizeof val) return;
  snprintf(key, sizeof key, "%.*s", (int)(eq - token), token);
  snprintf(val, sizeof val, "%.*s", (int)(len - (size_t)(eq - token) - 1), eq + 1);
  for (const char *k = key; *k; k++)
    if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') || *k == '_')) return;
  char *end;
  double v = strtod(val, &end);
  if (!*val || *end || !isfinite(v) || v < 0) return;
  if (!strcmp(key, "work_s") || !strcmp(key, "time_s")) r->work_s = v;
  else if (!strcmp(key, "override_cpu_s")) r->cpu_s = v;
  else if (!strcmp(key, "override_peak_rss_kib")) r->peak_rss_kib = (long)v;
  else {
    int w = snprintf(r->extra + *used, sizeof r->extra - *used, "%s%s=%s", *used ? ";" : "", key, val);
    if (w > 0 && (size_t)w < sizeof r->extra - *used) *used += (size_t)w;
    else r->extra[*used] = '\0';
  }
}

/* Fills the record's metrics from the workload's output: lines of
 * key=value, or `result k=v k=v ...` lines (bench/fit). */
static void absorb_output(const char *out, bench_record_t *r) {
  size_t used = strlen(r->extra);
  for (const char *line = out; *line;) {
    size_t len = strcspn(line, "\n");
    int is_result = len > 7 && !strncmp(line, "result ", 7);
    if (is_result) {
      for (size_t i = 7; i < len;) {
        size_t tok = strcspn(line + i, " \t\n");
        if (tok > len - i) tok = len - i;
        if (tok) absorb_token(line + i, tok, r, &used);
        i += tok + 1;
      }
    } else if (!memchr(line, ' ', len)) {
      absorb_token(line, len, r, &used);
    }
    line += len;
    if (*line == '\n') line++;
  }
}

/* The last non-empty line of a text (for failure messages). */
static void last_line(const char *text, char *buf, size_t len) {
  buf[0] = '\0';
  const char *end = text + strlen(text);
  while (end > text && (end[-1] == '\n' || end[-1] == ' ')) end--;
  const char *start = end;
  while (start > text && start[-1] != '\n') start--;
  snprintf(buf, len, "%.*s", (int)(end - start), start);
}

/* ---- output directory and charts -------------------------------------- */

static int make_dirs(const char *path) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      if (mkdir(buf, 0755) && errno != EEXIST) return -1;
      *p = '/';
    }
  return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

static int make_run_dir(const char *root, char *dir, size_t len, char *stamp, size_t stamp_len) {
  if (make_dirs(root)) {
    fprintf(stderr, "tessera bench: cannot create %s: %s\n", root, strerror(errno));
    return -1;
  }
  time_t now = time(NULL);
  char base[32];
  strftime(base, sizeof base, "%Y%m%d-%H%M%S", gmtime(&now));
  for (int k = 1; k < 100; k++) {
    if (k == 1) snprintf(stamp, stamp_len, "%s", base);
    else snprintf(stamp, stamp_len, "%s-%d", base, k);
    snprintf(dir, len, "%s/%s", root, stamp);
    if (mkdir(dir, 0755) == 0) return 0;
    if (errno != EEXIST) break;
  }
  fprintf(stderr, "tessera bench: cannot create %s: %s\n", dir, strerror(errno));
  return -1;
}

/* root/latest -> stamp, replaced atomically. */
static void point_latest(const char *root, const char *stamp) {
  char tmp[PATH_MAX], link[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s/.latest.%d", root, (int)getpid());
  snprintf(link, sizeof link, "%s/latest", root);
  unlink(tmp);
  if (symlink(stamp, tmp) == 0 && rename(tmp, link) == 0) return;
  unlink(tmp);
  fprintf(stderr, "tessera bench: could not point %s at %s: %s\n", link, stamp, strerror(errno));
}

/* Makes sure .venv has matplotlib; returns 0 and the interpreter path, or -1
 * with a one-line reason. Serialised with flock on plot.py so two suites
 * (the test and `make bench`) never build the venv at once. */
static int ensure_matplotlib(const char *log, char *python, size_t len, char *why, size_t why_len) {
  char venv[PATH_MAX], plot[PATH_MAX];
  char *import_matplotlib[] = {python, "-c", "import matplotlib", NULL};
  const char *env = getenv("TESSERA_BENCH_VENV");
  if (env && *env) snprintf(venv, sizeof venv, "%s", env);
  else snprintf(venv, sizeof venv, "%s/.venv", bench_source_dir());
  if (snprintf(python, len, "%s/bin/python", venv) >= (int)len) {
    snprintf(why, why_len, "virtual environment path too long");
    return -1;
  }
  snprintf(plot, sizeof plot, "%s/bench/plot.py", bench_source_dir());
  int lock = open(plot, O_RDONLY | O_CLOEXEC);
  if (lock < 0) {
    snprintf(why, why_len, "%s is missing", plot);
    return -1;
  }
  flock(lock, LOCK_EX);
  int rc = -1;
  if (access(python, X_OK) == 0 && run_command(import_matplotlib, NULL, 0) == 0) {
    rc = 0;
    goto done;
  }
  printf("charts: installing matplotlib into %s (first run only; log: %s)\n", venv, log);
  fflush(stdout);
  if (access(python, X_OK) != 0) {
    char *make_venv[] = {"python3", "-m", "venv", venv, NULL};
    if (run_command(make_venv, log, 1) != 0) {
      snprintf(why, why_len, "python3 -m venv failed (apt-get install python3-venv); see %s", log);
      goto done;
    }
  }
  char *pip_install[] = {python, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "--timeout", "30",
                         "--retries", "2", "matplotlib", NULL};
  if (run_command(pip_install, log, 1) != 0) {
    snprintf(why, why_len, "pip could not install matplotlib (is PyPI reachable?); see %s", log);
    goto done;
  }
  if (run_command(import_matplotlib, NULL, 0) != 0) {
    snprintf(why, why_len, "matplotlib installed but does not import; see %s", log);
    goto done;
  }
  rc = 0;
done:
  flock(lock, LOCK_UN);
  close(lock);
  return rc;
}

/* How the note on a time-ratio chart left out of a rebuilt report begins,
 * and the notes on the records themselves (note_uneven_runs): carry_notes
 * leaves them behind, as every report decides them afresh. */
static const char stale_chart_note[] = "charts: ";
static const char records_note[] = "records: ";

/* Draws the charts (when wanted) and fills the names of the chart files
 * that exist in dir. Writes charts.txt saying what was drawn or why not (the
 * tests read it); with --no-charts an existing charts.txt is left alone, so
 * `--from DIR --no-charts` keeps the record of an earlier drawing. */
static size_t draw_charts(const char *dir, const char *baseline, bench_metric_t metric, int wanted, char charts[][64],
                          size_t max) {
  static const char *const names[] = {"time_ratios.png", "peak_rss.png", "footprint_rss.png"};
  char log[PATH_MAX], python[PATH_MAX], why[PATH_MAX + 128], path[PATH_MAX];
  snprintf(log, sizeof log, "%s/plot.log", dir);
  snprintf(path, sizeof path, "%s/charts.txt", dir);
  FILE *note = NULL;
  int drawn = 0;
  if (wanted || access(path, F_OK) != 0) note = fopen(path, "w");
  if (!wanted) {
    if (note) fprintf(note, "skipped: --no-charts\n");
  } else if (ensure_matplotlib(log, python, sizeof python, why, sizeof why) != 0) {
    printf("charts skipped: %s (CSV, JSON and Markdown are still written)\n", why);
    if (note) fprintf(note, "skipped: matplotlib unavailable: %s\n", why);
  } else {
    char plot[PATH_MAX + 16];
    snprintf(plot, sizeof plot, "%s/bench/plot.py", bench_source_dir());
    char *argv[] = {python, plot, "--baseline", (char *)baseline, "--metric", (char *)bench_metric_name(metric),
                    (char *)dir, NULL};
    int st = run_command(argv, log, 1);
    if (st != 0) {
      printf("charts: bench/plot.py failed (status %d); see %s\n", st, log);
      if (note) fprintf(note, "failed: plot.py exited with %d\n", st);
    } else if ((drawn = 1) && note) {
      for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (access(path, R_OK) == 0) fprintf(note, "drawn: %s\n", names[i]);
      }
      /* What time_ratios.png is against, for a later --no-charts rebuild. */
      fprintf(note, "baseline: %s\nmetric: %s\n", baseline, bench_metric_name(metric));
    }
  }
  if (note) fclose(note);
  /* --no-charts keeps the charts there; a time-ratio chart drawn against
   * another baseline or metric than this report's was still shown in it
   * (a report "against jemalloc" showing "Time relative to system"). */
  int stale_ratios = 0, last_undrawn = 0;
  char drawn_baseline[256] = "", drawn_metric[256] = "";
  if (!wanted) {
    snprintf(path, sizeof path, "%s/charts.txt", dir);
    FILE *f = fopen(path, "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
      line[strcspn(line, "\n")] = '\0';
      if (!strncmp(line, "baseline: ", 10)) snprintf(drawn_baseline, sizeof drawn_baseline, "%s", line + 10);
      else if (!strncmp(line, "metric: ", 8)) snprintf(drawn_metric, sizeof drawn_metric, "%s", line + 8);
      /* The last drawing asked for was not made: the files there are an
       * earlier one's, whose baseline and records charts.txt no longer
       * names (a --no-charts rebuild after it linked them all again). */
      else if (!strncmp(line, "failed: ", 8) || !strncmp(line, "skipped: matplotlib", 19)) last_undrawn = 1;
    }
    if (f) fclose(f);
    stale_ratios = drawn_baseline[0] && (strcmp(drawn_baseline, baseline) || strcmp(drawn_metric, bench_metric_name(metric)));
  }
  size_t n = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && n < max; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (access(path, R_OK) != 0) continue;
    /* A drawing asked for and not made leaves the files of an earlier one
     * (a rebuild against another baseline, or of other records): linked,
     * they showed what this report does not say. */
    if (wanted && !drawn) {
      add_info("%s%s is not shown: it is from an earlier drawing, and this one was not made (charts.txt)",
               stale_chart_note, names[i]);
      continue;
    }
    if (last_undrawn) {
      add_info("%s%s is not shown: it is from an earlier drawing, and the last one asked for was not made "
               "(charts.txt)", stale_chart_note, names[i]);
      continue;
    }
    if (i == 0 && stale_ratios) {
      add_info("%s%s (drawn against %s, %s time) is not shown: this report is against %s, %s time; rebuild "
               "without --no-charts to redraw it", stale_chart_note, names[i], drawn_baseline, drawn_metric, baseline,
               bench_metric_name(metric));
      continue;
    }
    snprintf(charts[n++], 64, "%s", names[i]);
  }
  return n;
}

/* ---- report ------------------------------------------------------------- */

/* Date of the measurement when rebuilding a report (--from), else "". */
static char measured_date[64];
/* The measuring machine's summary line when rebuilding (--from), else "":
 * the machine that merely re-reports is not the one that measured. */
static char measured_machine[512];

/* ---- --from DIR --out OUT: a rebuilt report beside the original ---------- */

/* The raw files of a results directory, copied into the --out directory of
 * a rebuild so that it stands alone: the report's Method section points at
 * results.csv and machine.txt, plot.py reads results.csv and
 * rss_series.csv, and OUT can itself be given to --from. */
static const char *const raw_files[] = {"results.csv", "machine.txt", "rss_series.csv", "failures.log"};

/* Copies src to dst through a temporary file renamed over dst, so a failed
 * copy (a full disk) never leaves half a file. Returns 0, 1 when src does
 * not exist (the optional raw files), -1 on an error (errno set). */
static int copy_file(const char *src, const char *dst) {
  char tmp[PATH_MAX + 64], buf[65536];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", dst, (int)getpid()) >= (int)sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) return errno == ENOENT ? 1 : -1;
  int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int rc = out < 0 ? -1 : 0;
  for (ssize_t got; rc == 0 && (got = read(in, buf, sizeof buf)) != 0;) {
    if (got < 0) {
      if (errno != EINTR) rc = -1;
      continue;
    }
    for (ssize_t off = 0; rc == 0 && off < got;) {
      ssize_t put = write(out, buf + off, (size_t)(got - off));
      if (put < 0 && errno != EINTR) rc = -1;
      else if (put > 0) off += put;
    }
  }
  int saved = errno;
  close(in);
  if (out >= 0 && close(out) != 0 && rc == 0) rc = -1, saved = errno;
  if (rc == 0 && rename(tmp, dst) != 0) rc = -1, saved = errno;
  if (rc != 0 && out >= 0) unlink(tmp);
  errno = saved;
  return rc;
}

/* 1 when the two files hold the same bytes (both readable). */
static int same_contents(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  int same = fa && fb;
  while (same) {
    int ca = getc(fa), cb = getc(fb);
    if (ca != cb) same = 0;
    if (ca == EOF) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

/* --from DIR --out OUT before anything is written. Sets *in_place when OUT
 * is DIR itself. OUT may not exist yet, or be empty, or hold an earlier
 * rebuild of the same results; one holding the results.csv of another run
 * is refused (its raw files would be replaced by DIR's, silently). Returns
 * 0, or 2 after a usage message. */
static int check_rebuild_out(const char *from, const char *out, int *in_place) {
  struct stat sf, so;
  char theirs[PATH_MAX + 32], ours[PATH_MAX + 32];
  *in_place = 0;
  if (stat(out, &so) != 0) return 0; /* created when the report is written */
  if (!S_ISDIR(so.st_mode)) {
    fprintf(stderr, "tessera bench: --out %s is not a directory\n", out);
    return 2;
  }
  if (stat(from, &sf) == 0 && sf.st_dev == so.st_dev && sf.st_ino == so.st_ino) {
    *in_place = 1;
    return 0;
  }
  snprintf(theirs, sizeof theirs, "%s/results.csv", out);
  snprintf(ours, sizeof ours, "%s/results.csv", from);
  if (access(theirs, F_OK) == 0 && !same_contents(theirs, ours)) {
    fprintf(stderr, "tessera bench: --out %s holds the results of another run (its results.csv differs from %s); "
            "give a new or empty directory\n", out, ours);
    return 2;
  }
  return 0;
}

/* Creates OUT and copies DIR's raw files into it. Returns 0, or -1 after a
 * message. */
static int copy_raw_files(const char *from, const char *out) {
  if (make_dirs(out)) {
    fprintf(stderr, "tessera bench: cannot create %s: %s\n", out, strerror(errno));
    return -1;
  }
  for (size_t i = 0; i < sizeof raw_files / sizeof raw_files[0]; i++) {
    char src[PATH_MAX + 32], dst[PATH_MAX + 32];
    snprintf(src, sizeof src, "%s/%s", from, raw_files[i]);
    snprintf(dst, sizeof dst, "%s/%s", out, raw_files[i]);
    if (copy_file(src, dst) < 0) {
      fprintf(stderr, "tessera bench: cannot copy %s to %s: %s\n", src, dst, strerror(errno));
      return -1;
    }
  }
  return 0;
}

/* Reads "key: value" from DIR/machine.txt; returns 1 when found. */
static int read_machine_field(const char *dir, const char *key, char *out, size_t len) {
  char path[PATH_MAX + 32], line[2048];
  snprintf(path, sizeof path, "%s/machine.txt", dir);
  FILE *m = fopen(path, "r");
  int found = 0;
  size_t klen = strlen(key);
  while (m && !found && fgets(line, sizeof line, m))
    if (!strncmp(line, key, klen) && !strncmp(line + klen, ": ", 2)) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(out, len, "%s", line + klen + 2);
      found = 1;
    }
  if (m) fclose(m);
  return found;
}

/* The note a rebuild adds; an earlier rebuild's is replaced, not kept. */
static const char rebuilt_note[] = "report rebuilt from results.csv by: ";

/* Takes the notes of the report being rebuilt (DIR/report.md's "## Notes"
 * list) into this report's: they say which allocators and rows the run
 * skipped and why, and are kept nowhere else (results.csv has only the
 * runs), so a rebuild dropped them. */
static void carry_notes(const char *dir) {
  char path[PATH_MAX + 32], line[4096];
  snprintf(path, sizeof path, "%s/report.md", dir);
  FILE *f = fopen(path, "r");
  int in_notes = 0, whole = 1;
  while (f && fgets(line, sizeof line, f)) {
    int starts = whole; /* this chunk begins a line */
    size_t len = strcspn(line, "\n");
    whole = line[len] == '\n';
    line[len] = '\0';
    if (!starts) continue; /* the rest of an over-long line */
    if (!strncmp(line, "## ", 3)) in_notes = !strcmp(line, "## Notes");
    else if (in_notes && !strncmp(line, "- ", 2) && strncmp(line + 2, rebuilt_note, sizeof rebuilt_note - 1) &&
             strncmp(line + 2, stale_chart_note, sizeof stale_chart_note - 1) &&
             strncmp(line + 2, records_note, sizeof records_note - 1) && n_notes < MAX_NOTES)
      notes[n_notes++] = strdup(line + 2);
  }
  if (f) fclose(f);
}

/* qsort order of records by (workload, allocator, threads, run). */
static int record_key_cmp(const void *pa, const void *pb) {
  const bench_record_t *a = *(const bench_record_t *const *)pa, *b = *(const bench_record_t *const *)pb;
  int c = strcmp(a->workload, b->workload);
  if (!c) c = strcmp(a->allocator, b->allocator);
  if (!c) c = (a->threads > b->threads) - (a->threads < b->threads);
  if (!c) c = (a->run > b->run) - (a->run < b->run);
  return c;
}

/* Notes on records that do not make one complete run of the suite, which
 * the report otherwise takes as they come: the same (workload, allocator,
 * threads, run) twice (results.csv files put together: the cells then mix
 * runs of other days, or count twice the runs asked for), and cells with
 * more runs than others (an interrupted run: rows ran under some
 * allocators one time more). Cells whose runs were all skipped are left
 * out: a row a program is missing for stops after its first run. */
static void note_uneven_runs(const bench_record_t *recs, size_t n, const bench_table_t *t) {
  const bench_record_t **sorted = malloc((n ? n : 1) * sizeof *sorted);
  if (sorted) {
    for (size_t i = 0; i < n; i++) sorted[i] = &recs[i];
    qsort(sorted, n, sizeof *sorted, record_key_cmp);
    size_t repeats = 0, first = 0;
    for (size_t i = 1; i < n; i++)
      if (!record_key_cmp(&sorted[i - 1], &sorted[i]) && !repeats++) first = i;
    if (repeats)
      add_info("%s%zu records repeat the workload, allocator, threads and run of another (first: %s under %s, "
               "%d threads, run %d): results of several runs put together?", records_note, repeats, sorted[first]->workload,
               sorted[first]->allocator, sorted[first]->threads, sorted[first]->run);
    free(sorted);
  }
  int lo = 0, hi = 0;
  for (size_t r = 0; r < t->n_rows; r++)
    for (size_t a = 0; a < t->n_allocs; a++) {
      const bench_cell_t *c = bench_cell(t, r, a);
      if (c->runs == 0 || c->skipped == c->runs) continue;
      if (!lo || c->runs < lo) lo = c->runs;
      if (c->runs > hi) hi = c->runs;
    }
  if (lo != hi)
    add_info("%scells have %d to %d runs (an interrupted run?): a cell's medians are over the runs it has",
             records_note, lo, hi);
}

/* A --baseline the records do not have would give a table of n/a: refused
 * as a usage error (like a run's), naming the allocators there are. */
static int baseline_missing(const bench_table_t *t, const char *baseline, const char *csv) {
  if (t->baseline >= 0) return 0;
  fprintf(stderr, "tessera bench: baseline '%s' is not among the allocators of %s (", baseline, csv);
  for (size_t a = 0; a < t->n_allocs; a++) fprintf(stderr, "%s%s", a ? ", " : "", t->allocs[a]);
  fprintf(stderr, "%s)\n", t->n_allocs ? "" : "none");
  return 1;
}

/* Prints the table and writes report.md, results.json and the charts.
 * Returns the exit status: 0, 1 when the results cannot be read or the
 * reports written, 2 (nothing written) when rebuilding (--from) with a
 * --baseline absent from the records; a run checked its baseline before. */
static int write_reports(const char *src, const char *dir, const char *command, const char *baseline,
                         int baseline_given, bench_metric_t metric, int charts_wanted, int rebuilding) {
  char path[PATH_MAX], err[PATH_MAX + 128], machine[512], date[64];
  snprintf(path, sizeof path, "%s/results.csv", src);
  bench_record_t *recs;
  size_t n;
  if (bench_csv_read(path, &recs, &n, err, sizeof err)) {
    fprintf(stderr, "tessera bench: %s\n", err);
    return 1;
  }
  if (rebuilding && n == 0) {
    /* An empty table under exit 0 would look like a report. */
    fprintf(stderr, "tessera bench: %s has no results (a header and no record)\n", path);
    free(recs);
    return 1;
  }
  bench_table_t table;
  if (bench_table_build_metric(recs, n, baseline, metric, &table)) {
    fprintf(stderr, "tessera bench: out of memory building the report\n");
    free(recs);
    return 1;
  }
  if (rebuilding && baseline_given && baseline_missing(&table, baseline, path)) {
    bench_table_free(&table);
    free(recs);
    return 2;
  }
  if (table.baseline < 0 && !baseline_given && table.n_allocs > 0) {
    /* Runs without the default baseline (--from on an --allocators run). */
    static char first[BENCH_NAME_MAX];
    snprintf(first, sizeof first, "%s", table.allocs[0]);
    baseline = first;
    bench_table_free(&table);
    if (bench_table_build_metric(recs, n, baseline, metric, &table)) {
      fprintf(stderr, "tessera bench: out of memory building the report\n");
      free(recs);
      return 1;
    }
  }
  note_uneven_runs(recs, n, &table);
  /* Every check passed: only now is anything written. A rebuild into
   * another directory (--from DIR --out OUT) gets DIR's raw files first
   * (plot.py reads them there) and leaves DIR as it was. */
  if (strcmp(src, dir) && copy_raw_files(src, dir)) {
    bench_table_free(&table);
    free(recs);
    return 1;
  }
  bench_table_print(stdout, &table);
  fflush(stdout);

  char charts[8][64];
  const char *chart_names[8];
  size_t n_charts = draw_charts(dir, baseline, metric, charts_wanted, charts, 8);
  for (size_t i = 0; i < n_charts; i++) chart_names[i] = charts[i];

  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  if (measured_date[0]) snprintf(date, sizeof date, "%s", measured_date);
  if (measured_machine[0]) snprintf(machine, sizeof machine, "%s", measured_machine);
  else bench_machine_summary(machine, sizeof machine);
  bench_report_info_t info = {command, date, machine, (const char *const *)notes, n_notes, chart_names, n_charts};
  /* Both reports are written beside their names and renamed over them only
   * when both are complete: a write that failed half-way (a full disk)
   * left a truncated results.json beside a report.md already rebuilt, and
   * the reports that were there were lost. */
  int rc = 0;
  char md[PATH_MAX], md_tmp[PATH_MAX + 32], json[PATH_MAX], json_tmp[PATH_MAX + 32];
  snprintf(md, sizeof md, "%s/report.md", dir);
  snprintf(md_tmp, sizeof md_tmp, "%s.tmp.%d", md, (int)getpid());
  snprintf(json, sizeof json, "%s/results.json", dir);
  snprintf(json_tmp, sizeof json_tmp, "%s.tmp.%d", json, (int)getpid());
  if (bench_write_markdown(md_tmp, &table, &info) || bench_write_json(json_tmp, recs, n, &table, &info) ||
      rename(md_tmp, md) || rename(json_tmp, json))
    rc = -1;
  if (rc) {
    int saved = errno;
    unlink(md_tmp);
    unlink(json_tmp);
    fprintf(stderr, "tessera bench: could not write the reports in %s: %s\n", dir, strerror(saved));
  }
  bench_table_free(&table);
  free(recs);
  return rc ? 1 : 0;
}

/* ---- --list -------------------------------------------------------------- */

static void list_everything(const bench_config_t *c) {
  const char *bin = tessera_self_dir();
  printf("Workloads (name, group, threads, description):\n");
  for (size_t i = 0; i < bench_workload_count; i++) {
    const bench_workload_t *w = &bench_workloads[i];
    char prog[PATH_MAX];
    const char *threads = w->threading == BENCH_THREADS_SCALED ? "1,2,4x cores"
                          : w->threading == BENCH_THREADS_CORES ? "cores"
                                                                : "1";
    printf("  %-14s %-8s %-13s %s%s\n", w->name, w->group, threads, w->description,
           bench_workload_program(bin, w, prog, sizeof prog) ? "" : "  [not built]");
  }
  char sets[16][PATH_MAX];
  size_t n_sets = bench_trace_sets(sets, 16);
  printf("\nTrace sets (rows traces-<set>):\n");
  /* Name the directory looked in: with TESSERA_TRACES_DIR set it is not
   * ../shared/traces, which the message named whatever it was. */
  if (n_sets == 0) printf("  none in %s (replays the lab's generated traces, traces-generated)\n", bench_traces_root());
  for (size_t s = 0; s < n_sets; s++) {
    char *files[MAX_TRACE_FILES], name[BENCH_NAME_MAX];
    size_t total, nf = bench_trace_files(sets[s], files, MAX_TRACE_FILES, &total);
    for (size_t f = 0; f < nf; f++) free(files[f]);
    if (!trace_row_name(sets[s], name, sizeof name))
      printf("  %-27s %zu files in %s (not run: its row, traces-<set>, takes at most %d letters, digits and "
             "_.+-@)\n", strrchr(sets[s], '/') + 1, total, sets[s], BENCH_NAME_MAX - 8);
    else if (total > nf)
      printf("  traces-%-20s %zu files in %s (the first %zu by name are replayed)\n", strrchr(sets[s], '/') + 1,
             total, sets[s], nf);
    else
      printf("  traces-%-20s %zu files in %s\n", strrchr(sets[s], '/') + 1, nf, sets[s]);
  }
  printf("\nAllocators:\n");
  bench_allocator_t known[MAX_ALLOCS];
  size_t n = merged_allocators(c, known);
  for (size_t i = 0; i < n; i++)
    printf("  %-10s %-9s %s%s%s\n", known[i].name, known[i].available ? "available" : "absent",
           known[i].path[0] ? known[i].path : "(system malloc, no preload)",
           known[i].available || !known[i].install_hint ? "" : " -- ",
           known[i].available || !known[i].install_hint ? "" : known[i].install_hint);
  printf("\nGroups usable with --workloads: seed fit traces mt memory real\n");
}

/* Ctrl-C or SIGTERM: the workload (its own process group, so the terminal's
 * signal missed it) dies with us; results.csv keeps the runs so far. */
static char interrupt_msg[2 * PATH_MAX + 160] = "\ntessera bench: interrupted; the runs so far are in results.csv\n";

/* The message names the results directory and how to report what is there
 * (no report is written after an interruption; it only said results.csv).
 * Built before the handler is installed: the handler only writes it. */
static void set_interrupt_msg(const char *dir) {
  /* The command is for pasting into a shell: quoted unless plain. */
  char quoted[2 * PATH_MAX];
  size_t q = 0, plain = strspn(dir, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./+-@:,=");
  if (dir[plain] == '\0') {
    snprintf(quoted, sizeof quoted, "%s", dir);
  } else {
    quoted[q++] = '\'';
    for (const char *p = dir; *p && q + 5 < sizeof quoted; p++) {
      if (*p == '\'') {
        memcpy(quoted + q, "'\\''", 4);
        q += 4;
      } else {
        quoted[q++] = *p;
      }
    }
    quoted[q++] = '\'';
    quoted[q] = '\0';
  }
  snprintf(interrupt_msg, sizeof interrupt_msg,
           "\ntessera bench: interrupted; the runs so far are in %s/results.csv "
           "(report them: tessera bench --from %s)\n", dir, quoted);
}

static void on_interrupt(int sig) {
  bench_kill_current();
  if (write(2, interrupt_msg, strlen(interrupt_msg)) < 0) { /* nothing more to do */ }
  signal(sig, SIG_DFL);
  raise(sig);
}

/* --from names a results directory; two near misses get a message that
 * says what to give instead of "DIR/results.csv: cannot open": the
 * results.csv file itself, and the --out root of a run (bench-results),
 * whose newest results directory is ROOT/latest. Returns 1 after the
 * message. */
static int from_dir_misnamed(const char *dir) {
  char path[PATH_MAX + 32];
  struct stat st;
  if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) {
    fprintf(stderr, "tessera bench: --from wants the results directory, and %s is a file%s\n", dir,
            strcmp(strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir, "results.csv") ? ""
                                                                                     : " (give the directory it is in)");
    return 1;
  }
  snprintf(path, sizeof path, "%s/results.csv", dir);
  if (access(path, F_OK) == 0 || errno != ENOENT) return 0;
  snprintf(path, sizeof path, "%s/latest/results.csv", dir);
  if (access(path, F_OK) != 0) return 0;
  fprintf(stderr, "tessera bench: %s has no results.csv: it is the root of the runs (--out); "
          "the newest run is %s/latest\n", dir, dir);
  return 1;
}

/* ---- main ---------------------------------------------------------------- */

int cmd_bench(int argc, char **argv) {
  bench_config_t c;
  if (parse_args(argc, argv, &c)) return 2;
  if (c.from_dir && c.run_option) {
    fprintf(stderr, "tessera bench: %s only shapes a run of the suite, and --from runs nothing "
            "(with --from: --baseline, --metric, --no-charts, --out)\n", c.run_option);
    return 2;
  }
  if (check_custom_allocators(&c)) return 2;
  if (c.list) {
    list_everything(&c);
    return 0;
  }
  char command[2048] = "tessera";
  for (int i = 0; i < argc; i++) {
    size_t used = strlen(command);
    snprintf(command + used, sizeof command - used, " %s", argv[i]);
  }
  if (c.from_dir && from_dir_misnamed(c.from_dir)) return 1;
  if (c.from_dir) {
    /* With --out the rebuilt report goes there and DIR is only read (it may
     * be read-only, or someone else's); without, DIR's reports are
     * rewritten, as scripts written before --out applied here expect. */
    const char *dst = c.from_dir;
    int in_place = 1;
    if (c.out_given) {
      int rc = check_rebuild_out(c.from_dir, c.out_root, &in_place);
      if (rc) return rc;
      if (!in_place) dst = c.out_root;
    }
    /* The report names the command, date and machine that measured
     * (machine.txt); the rebuild is a note. */
    char original[2048];
    int found = read_machine_field(c.from_dir, "command", original, sizeof original);
    measured_date[0] = '\0';
    read_machine_field(c.from_dir, "date", measured_date, sizeof measured_date);
    if (!read_machine_field(c.from_dir, "summary", measured_machine, sizeof measured_machine))
      snprintf(measured_machine, sizeof measured_machine, "unknown (not in %s/machine.txt)", c.from_dir);
    carry_notes(c.from_dir);
    if (!found) return write_reports(c.from_dir, dst, command, c.baseline, c.baseline_given, c.metric, c.charts, 1);
    if (n_notes < MAX_NOTES) {
      char note[2100];
      snprintf(note, sizeof note, "%s%s", rebuilt_note, command);
      notes[n_notes++] = strdup(note);
    }
    return write_reports(c.from_dir, dst, original, c.baseline, c.baseline_given, c.metric, c.charts, 1);
  }

  printf("tessera bench: %s\n", c.quick == 1 ? "quick smoke run" : c.quick == -1 ? "full suite" : "default suite");
  bench_allocator_t allocs[MAX_ALLOCS];
  size_t n_allocs = choose_allocators(&c, allocs);
  if (n_allocs == (size_t)-1) return 2;
  if (n_allocs == 0) {
    fprintf(stderr, "tessera bench: no allocator to run\n");
    return 2;
  }
  int have_baseline = 0;
  for (size_t a = 0; a < n_allocs; a++) have_baseline |= !strcmp(allocs[a].name, c.baseline);
  if (!have_baseline && !c.baseline_given) {
    /* --allocators without system: compare against the first one named. */
    c.baseline = allocs[0].name;
    have_baseline = 1;
    printf("baseline: %s (system is not among the allocators)\n", c.baseline);
  }
  if (!have_baseline) {
    fprintf(stderr, "tessera bench: baseline '%s' is not among the allocators being run\n", c.baseline);
    return 2;
  }
  static bench_job_t jobs[MAX_ROWS];
  size_t n_jobs = build_jobs(&c, jobs);
  if (c.workloads) {
    for (const char *p = c.workloads; *p;) {
      size_t n = strcspn(p, ",");
      int known = 0;
      for (size_t i = 0; i < bench_workload_count; i++)
        if ((strlen(bench_workloads[i].name) == n && !strncmp(bench_workloads[i].name, p, n)) ||
            (strlen(bench_workloads[i].group) == n && !strncmp(bench_workloads[i].group, p, n)))
          known = 1;
      for (size_t j = 0; j < n_jobs; j++)
        if (strlen(jobs[j].name) == n && !strncmp(jobs[j].name, p, n)) known = 1;
      if (!known) {
        fprintf(stderr, "tessera bench: unknown workload '%.*s' (see --list)\n", (int)n, p);
        return 2;
      }
      p += n;
      if (*p == ',') p++;
    }
  }
  if (n_jobs == 0) {
    fprintf(stderr, "tessera bench: no workload to run\n");
    return 2;
  }

  char dir[PATH_MAX], stamp[64], path[PATH_MAX + 32];
  if (make_run_dir(c.out_root, dir, sizeof dir, stamp, sizeof stamp)) return 1;
  for (size_t j = 0; j < n_jobs; j++)
    if (jobs[j].generate) generate_traces(&jobs[j], dir);
  snprintf(path, sizeof path, "%s/machine.txt", dir);
  bench_machine_write(path, allocs, n_allocs, command);
  snprintf(path, sizeof path, "%s/results.csv", dir);
  FILE *csv = fopen(path, "w");
  snprintf(path, sizeof path, "%s/rss_series.csv", dir);
  FILE *series = fopen(path, "w");
  snprintf(path, sizeof path, "%s/failures.log", dir);
  FILE *failures = fopen(path, "w");
  if (!csv || !series || !failures) {
    fprintf(stderr, "tessera bench: cannot write in %s: %s\n", dir, strerror(errno));
    return 1;
  }
  bench_csv_write_header(csv);
  fprintf(series, "workload,allocator,threads,run,t_s,rss_kib\n");

  printf("allocators:");
  for (size_t a = 0; a < n_allocs; a++) printf(" %s", allocs[a].name);
  printf("\nrows: %zu, runs: %d, scale: %g, results: %s\n", n_jobs, c.runs, c.scale, dir);
  fflush(stdout);

  set_interrupt_msg(dir);
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  signal(SIGHUP, on_interrupt);
  int tty = isatty(1);
  int counters_work = 1; /* instructions per run, while the kernel offers them */
  size_t total = (size_t)c.runs * n_jobs * n_allocs, done = 0, failed = 0;
  double suite_start = (double)time(NULL);
  for (int run = 1; run <= c.runs; run++) {
    for (size_t j = 0; j < n_jobs; j++) {
      bench_job_t *job = &jobs[j];
      if (job->dropped) {
        done += n_allocs;
        continue;
      }
      char line[1024];
      int line_len = snprintf(line, sizeof line, "[run %d/%d] %-22s", run, c.runs, job->label);
      int skipped_here = 0;
      char skip_reason[256] = "";
      for (size_t k = 0; k < n_allocs; k++) {
        const bench_allocator_t *al = &allocs[(k + (size_t)run + j) % n_allocs];
        if (tty) {
          double elapsed = (double)time(NULL) - suite_start;
          printf("\r[%3zu/%zu] run %d/%d  %-22s %-10s", done + 1, total, run, c.runs, job->label, al->name);
          if (done >= n_allocs && elapsed > 0)
            printf(" ~%.0f s left ", elapsed / (double)done * (double)(total - done));
          fflush(stdout);
        }
        bench_spawn_t spec = {job->argv, al->path[0] ? al->path : NULL, c.timeout_s,
                              job->workload->rss_series ? 0.01 : 0,
                              counters_work ? BENCH_COUNT_INSTRUCTIONS : BENCH_COUNT_NONE};
        bench_outcome_t o;
        bench_spawn(&spec, &o);
        bench_record_t rec;
        memset(&rec, 0, sizeof rec);
        snprintf(rec.workload, sizeof rec.workload, "%s", job->name);
        snprintf(rec.allocator, sizeof rec.allocator, "%s", al->name);
        rec.threads = job->threads;
        rec.run = run;
        rec.wall_s = o.wall_s;
        rec.user_s = o.user_s;
        rec.sys_s = o.sys_s;
        rec.cpu_s = o.user_s + o.sys_s;
        rec.peak_rss_kib = o.maxrss_kib;
        rec.work_s = NAN;
        snprintf(rec.status, sizeof rec.status, "%s", o.status);
        absorb_output(o.out, &rec);
        if (o.counter >= 0) {
          size_t used = strlen(rec.extra);
          snprintf(rec.extra + used, sizeof rec.extra - used, "%sinstructions=%lld", used ? ";" : "", o.counter);
        } else if (counters_work) {
          counters_work = 0; /* asked once: the answer will not change */
          add_info("instructions: no hardware instruction counter here (perf events), so none recorded");
        }
        bench_csv_write(csv, &rec);
        for (size_t s = 0; s < o.n_samples; s++)
          fprintf(series, "%s,%s,%d,%d,%.4f,%ld\n", rec.workload, rec.allocator, rec.threads, run, o.sample_t[s],
                  o.sample_kib[s]);
        char why[256];
        last_line(o.err, why, sizeof why);
        if (!strcmp(o.status, "skipped")) {
          skipped_here = 1;
          snprintf(skip_reason, sizeof skip_reason, "%s", why);
        } else if (!bench_record_ok(&rec)) {
          failed++;
          if (tty) printf("\r%*s\r", 78, "");
          printf("  FAIL %s under %s: %s%s%s\n", job->label, al->name, o.status, why[0] ? " -- " : "", why);
          fprintf(failures, "== %s under %s, run %d: %s\n%s\n", job->label, al->name, run, o.status, o.err);
          fflush(failures);
        }
        if (line_len < (int)sizeof line - 40) {
          if (bench_record_ok(&rec))
            line_len += snprintf(line + line_len, sizeof line - (size_t)line_len, " %s %.3fs", al->name,
                                 bench_record_time(&rec));
          else
            line_len += snprintf(line + line_len, sizeof line - (size_t)line_len, " %s %s", al->name, o.status);
        }
        bench_outcome_free(&o);
        done++;
      }
      if (tty) printf("\r%*s\r", 78, "");
      if (skipped_here) {
        job->dropped = 1;
        add_note("%s: %s", job->label, skip_reason[0] ? skip_reason : "the workload reported it cannot run here");
      } else {
        printf("%s\n", line);
      }
      fflush(stdout);
    }
  }
  fclose(csv);
  fclose(series);
  fclose(failures);
  printf("%zu runs in %.0f s, %zu failed\n", done, (double)time(NULL) - suite_start, failed);

  int rc = write_reports(dir, dir, command, c.baseline, 1, c.metric, c.charts, 0);
  point_latest(c.out_root, stamp);
  printf("\nresults: %s/ (results.csv, results.json, report.md, machine.txt, charts)\n", dir);
  return rc ? 1 : 0;
}
