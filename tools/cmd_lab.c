/* cmd_lab: `tessera lab`, the command line of the allocator lab.
 *
 * Owns option parsing, trace loading (files, directories of *.rep, or the
 * generated demo set), the choice of policies, the reference throughput and
 * the four output forms (table, --compare table, --csv, --json); the replay
 * and the metrics are lab/driver.c's, the parsing lab/trace.c's and the
 * generator (`tessera lab gen`) lab/tracegen.c's.
 * Exit status: 0 every run valid, 1 some run invalid, 2 usage or input error
 * (or results that could not be written to standard output).
 * Called from the dispatcher in tools/tessera.c. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "bench_report.h"
#include "driver.h"
#include "memlib.h"
#include "policy.h"
#include "student.h"
#include "trace.h"
#include "tracegen.h"

#define DEFAULT_RUNS 5
#define DEFAULT_MM_TIMEOUT 120u /* seconds per pass with --mm (--timeout) */
#define DEFAULT_HEAP_CAP ((size_t)1 << 40) /* address space only: memlib reserves lazily */
#define MIN_HEAP_CAP ((size_t)128 << 20)
#define DEMO_SEED 1

typedef enum output_e { OUT_TABLE, OUT_CSV, OUT_JSON } output_t;

typedef struct lab_args_s {
  const char **policy_names;
  size_t n_policy_names;
  const char *mm_path;      /* --mm: a student's mm.c as a shared object */
  bool compare, system, list_policies;
  output_t output;
  driver_config_t cfg;
  size_t heap_cap;          /* 0 = default */
  double reference_kops;    /* 0 = measure the system allocator */
  int format;               /* --format: TRACE_FORMAT_* or TRACE_FORMAT_AUTO */
  bool timeout_given;       /* --timeout (else: none, or DEFAULT_MM_TIMEOUT with --mm) */
  char **paths;
  int n_paths;
} lab_args_t;

static void lab_usage(FILE *out) {
  fprintf(out,
    "usage: tessera lab [OPTIONS] [TRACE|DIR...]\n"
    "       tessera lab --list-policies\n"
    "       tessera lab gen PATTERN|all [--seed N] [--ops N] [--max-size BYTES] [--chains N] -o FILE|DIR\n"
    "\n"
    "Replay malloc-lab traces on the lab's heap policies, check every operation and\n"
    "score them as the malloc-lab driver does (utilization, throughput, perf index).\n"
    "A DIR means every *.rep file in it, sorted by name. With no TRACE, a demo runs on\n"
    "traces generated in memory (every pattern of 'tessera lab gen', seed %d).\n"
    "\n"
    "Which allocator:\n"
    "  --policy NAME[,NAME...]  replay on these policies (default: the best one)\n"
    "  --compare                replay on every policy, side by side\n"
    "  --mm PATH.so             a student's malloc-lab mm.c, built as a shared object\n"
    "                           (cc -shared -fPIC -O2 -o mm.so mm.c), graded as a policy\n"
    "                           (alone, or added to --policy/--compare)\n"
    "  --system                 the C library's malloc/free/realloc as a pseudo-policy\n"
    "                           (alone, or added to --policy/--compare); no utilization\n"
    "  --list-policies          list the policies (* marks the default) and exit\n"
    "\n"
    "How to read the traces:\n"
    "  --format auto|classic|cmu64|weighted\n"
    "                           which header the four first lines are (default auto:\n"
    "                           line 1 above 3 is a classic heap size; else line 1 is a\n"
    "                           weight and line 4 must be the trace's peak payload\n"
    "                           (cmu64) or a 0/1 flag (weighted))\n"
    "\n"
    "How to replay:\n"
    "  --align 8|16             payload alignment checked and asked of the policy\n"
    "                           (default: 8 for classic headers, 16 for weighted ones)\n"
    "  --check                  run the policy's heap checker after every operation\n"
    "  --check-every N          ... after every Nth operation (implies --check); the\n"
    "                           checker always runs once at the end of each trace\n"
    "  --check-budget N         caps --check/--check-every at N checker runs per trace,\n"
    "                           evenly spaced, on long traces (nothing without them)\n"
    "  --check-only             correctness pass only: no timed runs, no throughput,\n"
    "                           no perf index (fast; what the test suite uses)\n"
    "  --heap-cap BYTES         cap of the simulated heap (suffix K, M, G, T; default\n"
    "                           1T of reserved address space; the classic lab used 20M).\n"
    "                           A request past the cap is reported as out of memory\n"
    "  --timeout SECONDS        each pass of a trace (init and checked pass, or one timed\n"
    "                           pass) must end within it, or the run stops naming the op\n"
    "                           (default: none, but %u for the --mm object; 0 = none)\n"
    "  --runs N                 timed runs per trace; throughput uses the median\n"
    "                           (default %d, at most 64)\n"
    "  --reference KOPS         reference throughput for the perf index (default: the\n"
    "                           system allocator measured on the same traces in this run)\n"
    "\n"
    "Output (default: a table like the malloc-lab driver's):\n"
    "  --csv                    one CSV table: policy,trace,valid,util,ops,secs,kops,perf_index\n"
    "                           (util a 0-1 fraction; one TOTAL row per policy carries the\n"
    "                           perf index, empty on the other rows)\n"
    "  --json                   the same as one JSON document\n"
    "\n"
    "Every operation is checked: payload aligned, inside the heap, not overlapping a\n"
    "live payload, contents preserved across realloc; a NULL return is an error (out\n"
    "of memory when the heap cap is reached). Any error makes the perf index 0.\n"
    "perf index = 100 x (0.6 util + 0.4 min(1, Kops / reference)).\n"
    "Exit status: 0 all runs valid, 1 some run invalid, 2 usage or input error (or\n"
    "standard output could not be written).\n",
    DEMO_SEED, DEFAULT_MM_TIMEOUT, DEFAULT_RUNS);
}

static void gen_usage(FILE *out) {
  fprintf(out,
    "usage: tessera lab gen PATTERN|all [--seed N] [--ops N] [--max-size BYTES] [--chains N] -o FILE|DIR\n"
    "\n"
    "Write a malloc-lab trace (classic header format) of one stress pattern. The same\n"
    "options always give the same file. With 'all', -o names a directory that gets\n"
    "one PATTERN.rep per pattern. -o - writes one PATTERN to standard output.\n"
    "\n"
    "  --seed N          PRNG seed (default 1)\n"
    "  --ops N           about this many requests (default: per pattern)\n"
    "  --max-size BYTES  largest request (default: per pattern; largemem: at least 6G)\n"
    "  --chains N        realloc: number of interleaved growth chains (default 4)\n"
    "  -o FILE|DIR       where to write (required)\n"
    "\nPatterns:\n");
  for (const tracegen_pattern_t *p = tracegen_patterns(); p->name; p++)
    fprintf(out, "  %-11s %s\n", p->name, p->description);
  fprintf(out, "\nOnly when named (not in 'all': replaying needs tens of GiB of address space):\n");
  for (const tracegen_pattern_t *p = tracegen_named_only_patterns(); p->name; p++)
    fprintf(out, "  %-11s %s\n", p->name, p->description);
}

/* "123", "20M", "1T": binary suffixes. */
static int parse_bytes(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  /* strtoull skips blanks and takes a sign (' -3' is 2^64-3): digits only. */
  if (!s || *s < '0' || *s > '9') return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  unsigned shift = 0;
  switch (*end) {
  case '\0': break;
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  default: return -1;
  }
  if (*end) return -1;
  if (shift && v > (ULLONG_MAX >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

static int parse_count(const char *s, uint64_t min, uint64_t max, uint64_t *out) {
  char *end;
  errno = 0;
  if (!s || *s < '0' || *s > '9') return -1;  /* as in parse_bytes: no blank, no sign */
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || end == s || v < min || v > max) return -1;
  *out = v;
  return 0;
}

/* ---- tessera lab gen ---------------------------------------------------------- */

/* Writes the trace. A regular file (or a new one) is written beside its
 * final name and renamed over it only when complete: a write that failed
 * half-way (a full disk, a file size limit) left a truncated trace in place
 * of the one there before, exit 2 but the old file gone. Anything else
 * (-, /dev/stdout, a FIFO) is written as it is, since it cannot be renamed
 * over; a symbolic link to a file has its target replaced, not the link. */
static int write_text(const char *path, const char *text, size_t len) {
  char target[PATH_MAX], tmp[PATH_MAX + 32];
  struct stat st;
  int direct = !strcmp(path, "-") || (stat(path, &st) == 0 && !S_ISREG(st.st_mode));
  const char *dest = path;
  if (!direct && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    if (!realpath(path, target)) {
      fprintf(stderr, "tessera lab gen: %s: %s\n", path, strerror(errno));
      return -1;
    }
    dest = target;
  }
  if (!direct && snprintf(tmp, sizeof tmp, "%s.tmp.%d", dest, (int)getpid()) >= (int)sizeof tmp) {
    fprintf(stderr, "tessera lab gen: %s: %s\n", path, strerror(ENAMETOOLONG));
    return -1;
  }
  const char *open_path = direct ? path : tmp;
  FILE *f = !strcmp(path, "-") ? stdout : fopen(open_path, "wb");
  if (!f) {
    fprintf(stderr, "tessera lab gen: %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t put = fwrite(text, 1, len, f);
  int rc = (put == len && fflush(f) == 0) ? 0 : -1;
  int saved = errno;
  if (f != stdout && fclose(f) != 0 && rc == 0) rc = -1, saved = errno;
  if (rc == 0 && !direct && rename(tmp, dest) != 0) rc = -1, saved = errno;
  if (rc && !direct) unlink(tmp);
  if (rc) fprintf(stderr, "tessera lab gen: %s: write failed: %s\n", path, strerror(saved));
  return rc;
}

/* largemem exists to ask for blocks beyond the narrow block format: huge
 * blocks of 3 GiB and more, two of them freed and asked for again as one,
 * and a realloc past 4 GiB (lab/tracegen.c, gen_largemem). Every request is
 * clamped to --max-size, so below this there would be no such block. */
#define LARGEMEM_MIN_MAX_SIZE ((uint64_t)6 << 30)

/* Options that cannot give what was asked for: refused with a message
 * rather than writing something else. Returns 1 when refused. */
static int gen_params_unfit(const char *pattern, const char *output, const tracegen_params_t *params) {
  if (!strcmp(pattern, "all") && !strcmp(output, "-")) {
    fprintf(stderr, "tessera lab gen: 'all' writes one file per pattern into a directory; "
            "-o - (standard output) takes a single PATTERN\n");
    return 1;
  }
  if (!strcmp(pattern, "largemem") && params->max_size && params->max_size < LARGEMEM_MIN_MAX_SIZE) {
    fprintf(stderr, "tessera lab gen: largemem needs --max-size of at least 6G (its huge blocks are "
            "3 GiB and up, two of them are asked for again as one, and a realloc goes past 4 GiB); "
            "got %llu bytes\n", (unsigned long long)params->max_size);
    return 1;
  }
  return 0;
}

static int cmd_lab_gen(int argc, char **argv) {
  static const struct option opts[] = {
    {"seed", required_argument, 0, 's'}, {"ops", required_argument, 0, 'n'},
    {"max-size", required_argument, 0, 'm'}, {"chains", required_argument, 0, 'c'},
    {"output", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
  };
  tracegen_params_t params = {.seed = 1};
  const char *output = NULL;
  uint64_t v;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
    switch (c) {
    case 's':
      if (parse_count(optarg, 0, UINT64_MAX, &v)) goto bad_value;
      params.seed = v;
      break;
    case 'n':
      if (parse_count(optarg, 1, 50000000, &v)) goto bad_value;
      params.ops = (size_t)v;
      break;
    case 'm':
      if (parse_bytes(optarg, &v) || v == 0) goto bad_value;
      params.max_size = v;
      break;
    case 'c':
      if (parse_count(optarg, 1, 1024, &v)) goto bad_value;
      params.chains = (unsigned)v;
      break;
    case 'o':
      /* -o a -o b wrote only b, silently; which one was meant is unknown. */
      if (output) {
        fprintf(stderr, "tessera lab gen: -o is given twice ('%s' and '%s')\n", output, optarg);
        return 2;
      }
      output = optarg;
      break;
    case 'h': gen_usage(stdout); return 0;
    default: gen_usage(stderr); return 2;
    }
    continue;
  bad_value:
    fprintf(stderr, "tessera lab gen: bad value '%s' for --%s\n", optarg,
            c == 's' ? "seed" : c == 'n' ? "ops (1..50000000)" : c == 'm' ? "max-size" : "chains (1..1024)");
    return 2;
  }
  if (optind != argc - 1 || !output) {
    fprintf(stderr, "tessera lab gen: %s\n\n", optind == argc ? "which PATTERN?" :
            optind < argc - 1 ? "one PATTERN only" : "-o FILE is required");
    gen_usage(stderr);
    return 2;
  }
  const char *pattern = argv[optind];
  char err[256];
  if (gen_params_unfit(pattern, output, &params)) return 2;
  if (strcmp(pattern, "all") != 0) {
    char *text;
    size_t len;
    if (tracegen_text(pattern, &params, &text, &len, err, sizeof err) < 0) {
      fprintf(stderr, "tessera lab gen: %s\n", err);
      return 2;
    }
    int rc = write_text(output, text, len);
    free(text);
    return rc ? 2 : 0;
  }
  if (mkdir(output, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "tessera lab gen: %s: %s\n", output, strerror(errno));
    return 2;
  }
  for (const tracegen_pattern_t *p = tracegen_patterns(); p->name; p++) {
    char *text, path[PATH_MAX];
    size_t len;
    if (tracegen_text(p->name, &params, &text, &len, err, sizeof err) < 0) {
      fprintf(stderr, "tessera lab gen: %s\n", err);
      return 2;
    }
    snprintf(path, sizeof path, "%s/%s.rep", output, p->name);
    int rc = write_text(path, text, len);
    free(text);
    if (rc) return 2;
  }
  return 0;
}

/* ---- loading traces --------------------------------------------------------------- */

typedef struct trace_list_s {
  trace_t *items;
  size_t n, cap;
} trace_list_t;

static trace_t *list_add(trace_list_t *l) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    trace_t *items = realloc(l->items, cap * sizeof *items);
    if (!items) return NULL;
    l->items = items;
    l->cap = cap;
  }
  return &l->items[l->n++];
}

static void list_free(trace_list_t *l) {
  for (size_t i = 0; i < l->n; i++) trace_free(&l->items[i]);
  free(l->items);
}

static int load_one(trace_list_t *l, const char *path, int format) {
  trace_t *t = list_add(l);
  trace_error_t err;
  if (!t) {
    fprintf(stderr, "tessera lab: out of memory\n");
    return -1;
  }
  if (trace_load_as(path, format, t, &err) < 0) {
    l->n--;
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  if (t->stray_lines)
    fprintf(stderr, "%s:%u: note: %zu line%s after the last of the %zu requests ignored\n",
            path, t->first_stray_line, t->stray_lines, t->stray_lines == 1 ? "" : "s", t->num_ops);
  if (t->header_guessed)
    fprintf(stderr, "%s:1: note: header read as weighted (weight %d, flag %llu); if line 1 is a "
            "classic heap size, --format classic reads it as one\n",
            path, t->weight, (unsigned long long)t->header[3]);
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dir/name and its path, as load_dir names the files it loads. */
static void join_path(char *out, size_t len, const char *dir, const char *name) {
  size_t dl = strlen(dir);
  snprintf(out, len, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", name);
}

/* A folder named like a trace (x.rep/) is not one: skipped when scanning.
 * Anything else that cannot be read is left for load_one to report. */
static bool is_directory(const char *dir, const char *name) {
  char path[PATH_MAX];
  struct stat st;
  join_path(path, sizeof path, dir, name);
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int load_dir(trace_list_t *l, const char *dir, int format) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "%s: cannot open directory: %s\n", dir, strerror(errno));
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".rep") != 0 || is_directory(dir, e->d_name)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 32;
      char **nn = realloc(names, cap * sizeof *nn);
      if (!nn) { rc = -1; break; }
      names = nn;
    }
    if (!(names[n] = strdup(e->d_name))) { rc = -1; break; }
    n++;
  }
  closedir(d);
  if (rc) fprintf(stderr, "tessera lab: out of memory\n");
  else if (n == 0) {
    fprintf(stderr, "%s: no *.rep trace in this directory\n", dir);
    rc = -1;
  }
  if (n) qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n && rc == 0; i++) {
    char path[PATH_MAX];
    join_path(path, sizeof path, dir, names[i]);
    rc = load_one(l, path, format);
  }
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  return rc;
}

static int load_demo(trace_list_t *l) {
  for (const tracegen_pattern_t *p = tracegen_patterns(); p->name; p++) {
    tracegen_params_t params = {.seed = DEMO_SEED};
    char err[256];
    trace_t *t = list_add(l);
    if (!t || tracegen_trace(p->name, &params, t, err, sizeof err) < 0) {
      if (t) l->n--;
      fprintf(stderr, "tessera lab: demo: %s\n", t ? err : "out of memory");
      return -1;
    }
  }
  return 0;
}

/* ---- running ------------------------------------------------------------------------ */

typedef struct policy_run_s {
  const lab_policy_t *policy;
  driver_result_t *results;  /* one per trace */
  driver_totals_t totals;
} policy_run_t;

static volatile sig_atomic_t crashing;

static void on_crash(int sig) {
  if (!crashing) {
    crashing = 1;
    static const char head[] = "tessera lab: crashed (signal ";
    if (write(2, head, sizeof head - 1) < 0) {}
    char num[4] = {(char)('0' + sig / 10 % 10), (char)('0' + sig % 10), ')', 0};
    const char *n = sig < 10 ? num + 1 : num; /* "signal 6)", not "signal 06)" */
    if (write(2, n, (size_t)(num + 3 - n)) < 0) {}
    static const char mid[] = " while replaying ";
    if (write(2, mid, sizeof mid - 1) < 0) {}
    driver_write_current_op(2);
    if (write(2, "\n", 1) < 0) {}
  }
  raise(sig);  /* SA_RESETHAND: the default action now */
}

/* A pass that does not end within --timeout seconds (driver.c arms the
 * alarm): a student's mm_malloc that loops for ever hung the driver for
 * ever. Reported like a crash, with the op, and the process then dies of
 * SIGALRM (exit status 142 in a shell). */
static unsigned timeout_for_report;
static void on_timeout(int sig) {
  if (!crashing) {
    crashing = 1;
    static const char head[] = "tessera lab: timed out (a pass took more than ";
    if (write(2, head, sizeof head - 1) < 0) {}
    char num[12];
    int i = sizeof num;
    unsigned v = timeout_for_report;
    do num[--i] = (char)('0' + v % 10); while ((v /= 10) && i > 0);
    if (write(2, num + i, sizeof num - (size_t)i) < 0) {}
    static const char mid[] = " s, --timeout) while replaying ";
    if (write(2, mid, sizeof mid - 1) < 0) {}
    driver_write_current_op(2);
    if (write(2, "\n", 1) < 0) {}
  }
  raise(sig);  /* SA_RESETHAND: the default action now */
}

/* A policy that calls exit() (a student's mm.c that gives up on an error)
 * ended the run with the status it chose, 0 included, and no table: a
 * grader saw success. It is an invalid run, named like a crash. (_exit()
 * cannot be caught this way.) */
static void on_exit_during_replay(void) {
  if (!driver_in_replay() || crashing) return;
  crashing = 1;
  static const char head[] = "tessera lab: the policy called exit() while replaying ";
  if (write(2, head, sizeof head - 1) < 0) {}
  driver_write_current_op(2);
  if (write(2, "\n", 1) < 0) {}
  _exit(1);
}

/* SIGABRT too: a failed assert() in a student's mm.c (--mm), or glibc's
 * abort on a heap it finds corrupted, is a crash of the replay like any
 * other, and the op that led to it is what the user needs. */
static void install_crash_report(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_crash;
  sa.sa_flags = (int)SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  sigaction(SIGFPE, &sa, NULL);
  sigaction(SIGILL, &sa, NULL);
  sigaction(SIGABRT, &sa, NULL);
  sa.sa_handler = on_timeout;
  sigaction(SIGALRM, &sa, NULL);
  atexit(on_exit_during_replay);
}

/* Returns -1 when the driver itself failed (out of memory). */
static int run_policy(driver_t *d, policy_run_t *run, const trace_list_t *traces,
                      const driver_config_t *cfg, bool print_errors) {
  run->results = calloc(traces->n ? traces->n : 1, sizeof *run->results);
  if (!run->results) return -1;
  /* On a terminal, one line that says which trace runs now: slow code (an
   * O(n^2) search on the binary traces takes minutes) is then visibly at
   * work, not hung. Rewritten in place and cleared; never in a file. */
  bool progress = isatty(2);
  for (size_t i = 0; i < traces->n; i++) {
    if (progress)
      fprintf(stderr, "\r\033[Ktessera lab: %s: trace %zu of %zu, %s ...", run->policy->name, i + 1, traces->n,
              trace_basename(&traces->items[i]));
    int rc = driver_run(d, run->policy, &traces->items[i], cfg, &run->results[i]);
    if (progress) fprintf(stderr, "\r\033[K");
    if (rc < 0) {
      fprintf(stderr, "tessera lab: %s\n", run->results[i].error);
      return -1;
    }
    if (rc > 0 && print_errors)
      fprintf(stderr, "%s: %s\n", run->policy->name, run->results[i].error);
  }
  return 0;
}

/* ---- output ------------------------------------------------------------------------- */

static const char *short_name(const trace_t *t) { return trace_basename(t); }

static bool any_weighted(const trace_list_t *traces) {
  for (size_t i = 0; i < traces->n; i++)
    if (traces->items[i].format != TRACE_FORMAT_CLASSIC) return true;
  return false;
}

static void print_reference(double ref, bool measured) {
  if (ref > 0)
    printf("Reference throughput: %.0f Kops/s (%s)\n", ref,
           measured ? "system allocator, same traces, this run" : "--reference");
  else
    printf("Reference throughput: none (--check-only: no timed runs)\n");
}

static void print_table(const policy_run_t *run, const trace_list_t *traces, double ref) {
  int w = 5;
  for (size_t i = 0; i < traces->n; i++) {
    int len = (int)strlen(short_name(&traces->items[i]));
    if (len > w) w = len;
  }
  if (w > 32) w = 32;
  bool weights = any_weighted(traces);
  printf("\nResults for %s%s:\n", run->policy->name,
         driver_is_system(run->policy) ? " (the C library's allocator)" : "");
  printf("%3s  %-*s %s valid  align    util       ops       secs      Kops\n", "#", w, "trace",
         weights ? " w" : "");
  for (size_t i = 0; i < traces->n; i++) {
    const driver_result_t *r = &run->results[i];
    const trace_t *t = &traces->items[i];
    char util[16] = "-", secs[16] = "-", kops[16] = "-", wt[8] = "";
    if (r->valid && r->has_util) snprintf(util, sizeof util, "%6.1f%%", 100 * r->util);
    if (r->valid && r->timed) {
      snprintf(secs, sizeof secs, "%.6f", r->secs);
      snprintf(kops, sizeof kops, "%.0f", r->secs > 0 ? (double)r->ops / r->secs / 1000 : 0.0);
    }
    if (weights) snprintf(wt, sizeof wt, " %d", t->weight);
    printf("%3zu  %-*.*s %s %5s  %5zu %7s %9llu %10s %9s\n", i, w, w, short_name(t), wt,
           r->valid ? "yes" : "no", r->align, util, (unsigned long long)r->ops, secs, kops);
  }
  const driver_totals_t *tot = &run->totals;
  char util[16] = "-", secs[16] = "-", kops[16] = "-";
  if (tot->has_util) snprintf(util, sizeof util, "%6.1f%%", 100 * tot->util);
  if (tot->has_thru) {
    snprintf(secs, sizeof secs, "%.6f", tot->secs);
    snprintf(kops, sizeof kops, "%.0f", tot->kops);
  }
  printf("%3s  %-*s %s %5s  %5s %7s %9llu %10s %9s\n", "", w, "Total", weights ? "  " : "",
         tot->all_valid ? "yes" : "no", "", util, (unsigned long long)tot->ops, secs, kops);
  if (weights)
    printf("(w: trace weight; 0 = correctness only, 2 = utilization only, 3 = throughput only)\n");
  if (!tot->all_valid) {
    printf("Perf index = 0/100 (a run was invalid: see the errors above)\n");
  } else if (tot->has_index) {
    double thru = tot->kops / ref;
    printf("Perf index = %.1f (util) + %.1f (thru) = %.1f/100\n", 60 * tot->util,
           40 * (thru < 1 ? thru : 1), tot->perf_index);
  } else if (!driver_is_system(run->policy)) {
    printf("Perf index: n/a (no throughput measured)\n");
  }
}

/* One matrix of per-trace values, policies as rows, traces as columns,
 * split into chunks so that every line fits in 100 columns. */
static void print_matrix(const char *title, const policy_run_t *runs, size_t n_runs,
                         const trace_list_t *traces, bool kops) {
  const int name_w = 23, col_w = 7;
  const size_t per_chunk = (size_t)((100 - name_w) / col_w);
  printf("\n%s:\n", title);
  for (size_t start = 0; start < traces->n; start += per_chunk) {
    size_t end = start + per_chunk < traces->n ? start + per_chunk : traces->n;
    printf("%-*s", name_w, "policy");
    for (size_t i = start; i < end; i++) {
      char h[16];
      snprintf(h, sizeof h, "T%zu", i);
      printf("%*s", col_w, h);
    }
    printf("\n");
    for (size_t p = 0; p < n_runs; p++) {
      printf("%-*.*s", name_w, name_w - 1, runs[p].policy->name);
      for (size_t i = start; i < end; i++) {
        const driver_result_t *r = &runs[p].results[i];
        char cell[16] = "-";
        if (!r->valid) snprintf(cell, sizeof cell, "FAIL");
        else if (kops && r->timed)
          snprintf(cell, sizeof cell, "%.0f", r->secs > 0 ? (double)r->ops / r->secs / 1000 : 0.0);
        else if (!kops && r->has_util) snprintf(cell, sizeof cell, "%.1f", 100 * r->util);
        printf("%*s", col_w, cell);
      }
      printf("\n");
    }
  }
}

static void print_compare(const policy_run_t *runs, size_t n_runs, const trace_list_t *traces,
                          double ref) {
  printf("\nTraces:");
  int col = 7;
  for (size_t i = 0; i < traces->n; i++) {
    char item[64];
    int len = snprintf(item, sizeof item, " T%zu=%s", i, short_name(&traces->items[i]));
    if (col + len > 99) {
      printf("\n      ");
      col = 6;
    }
    printf("%s", item);
    col += len;
  }
  printf("\n");
  print_matrix("Utilization (%) by trace", runs, n_runs, traces, false);
  bool timed = false;
  for (size_t p = 0; p < n_runs; p++) timed |= runs[p].totals.has_thru;
  if (timed) print_matrix("Throughput (Kops/s) by trace", runs, n_runs, traces, true);
  printf("\nSummary:\n%-22s %7s %8s %10s %10s %8s %7s\n", "policy", "valid", "util", "ops",
         "Kops", "thru", "index");
  for (size_t p = 0; p < n_runs; p++) {
    const driver_totals_t *t = &runs[p].totals;
    size_t valid = 0;
    for (size_t i = 0; i < traces->n; i++) valid += runs[p].results[i].valid;
    char vs[24], util[16] = "-", kops[16] = "-", thru[16] = "-", index[16] = "-";
    snprintf(vs, sizeof vs, "%zu/%zu", valid, traces->n);
    if (t->has_util) snprintf(util, sizeof util, "%.1f%%", 100 * t->util);
    if (t->has_thru) snprintf(kops, sizeof kops, "%.0f", t->kops);
    if (t->has_thru && ref > 0) snprintf(thru, sizeof thru, "%.0f%%", 100 * t->kops / ref);
    if (t->has_index) snprintf(index, sizeof index, "%.1f", t->perf_index);
    printf("%-22.22s %7s %8s %10llu %10s %8s %7s\n", runs[p].policy->name, vs, util,
           (unsigned long long)t->ops, kops, thru, index);
  }
  printf("(thru: Kops/s relative to the reference; index = 60 x util + 40 x min(1, thru))\n");
}

static void csv_field(const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, stdout);
    return;
  }
  putchar('"');
  for (; *s; s++) {
    if (*s == '"') putchar('"');
    putchar(*s);
  }
  putchar('"');
}

static void print_csv(const policy_run_t *runs, size_t n_runs, const trace_list_t *traces) {
  printf("policy,trace,valid,util,ops,secs,kops,perf_index\n");
  for (size_t p = 0; p < n_runs; p++) {
    for (size_t i = 0; i < traces->n; i++) {
      const driver_result_t *r = &runs[p].results[i];
      csv_field(runs[p].policy->name);
      putchar(',');
      csv_field(short_name(&traces->items[i]));
      printf(",%s,", r->valid ? "yes" : "no");
      if (r->valid && r->has_util) printf("%.6f", r->util);
      printf(",%llu,", (unsigned long long)r->ops);
      if (r->valid && r->timed)
        printf("%.6f,%.1f", r->secs, r->secs > 0 ? (double)r->ops / r->secs / 1000 : 0.0);
      else
        putchar(',');
      printf(",\n");
    }
    const driver_totals_t *t = &runs[p].totals;
    csv_field(runs[p].policy->name);
    printf(",TOTAL,%s,", t->all_valid ? "yes" : "no");
    if (t->has_util) printf("%.6f", t->util);
    printf(",%llu,", (unsigned long long)t->ops);
    if (t->has_thru) printf("%.6f,%.1f", t->secs, t->kops);
    else putchar(',');
    putchar(',');
    if (t->has_index) printf("%.1f", t->perf_index);
    putchar('\n');
  }
}

static void json_number(bool present, const char *fmt, double v) {
  if (present && isfinite(v)) printf(fmt, v);
  else fputs("null", stdout);
}

static void print_json(const policy_run_t *runs, size_t n_runs, const trace_list_t *traces,
                       const driver_config_t *cfg, double ref, bool ref_measured) {
  printf("{\n  \"align\": ");
  if (cfg->align) printf("%zu", cfg->align);
  else fputs("\"auto\"", stdout);
  printf(",\n  \"reference_kops\": ");
  json_number(ref > 0, "%.1f", ref);
  printf(",\n  \"reference\": ");
  bench_json_string(stdout, ref <= 0 ? "none" : ref_measured ? "system" : "option");
  printf(",\n  \"policies\": [");
  for (size_t p = 0; p < n_runs; p++) {
    printf("%s\n    {\"policy\": ", p ? "," : "");
    bench_json_string(stdout, runs[p].policy->name);
    printf(", \"traces\": [");
    for (size_t i = 0; i < traces->n; i++) {
      const driver_result_t *r = &runs[p].results[i];
      printf("%s\n      {\"trace\": ", i ? "," : "");
      bench_json_string(stdout, short_name(&traces->items[i]));
      printf(", \"path\": ");
      bench_json_string(stdout, traces->items[i].name);
      printf(", \"valid\": %s, \"util\": ", r->valid ? "true" : "false");
      json_number(r->valid && r->has_util, "%.6f", r->util);
      printf(", \"ops\": %llu, \"secs\": ", (unsigned long long)r->ops);
      json_number(r->valid && r->timed, "%.6f", r->secs);
      printf(", \"kops\": ");
      json_number(r->valid && r->timed && r->secs > 0, "%.1f",
                  r->secs > 0 ? (double)r->ops / r->secs / 1000 : 0);
      printf(", \"align\": %zu, \"checks\": %llu, \"error\": ", r->align,
             (unsigned long long)r->checks);
      if (r->valid) fputs("null", stdout);
      else bench_json_string(stdout, r->error);
      putchar('}');
    }
    const driver_totals_t *t = &runs[p].totals;
    printf("\n    ],\n    \"total\": {\"valid\": %s, \"util\": ", t->all_valid ? "true" : "false");
    json_number(t->has_util, "%.6f", t->util);
    printf(", \"ops\": %llu, \"secs\": ", (unsigned long long)t->ops);
    json_number(t->has_thru, "%.6f", t->secs);
    printf(", \"kops\": ");
    json_number(t->has_thru, "%.1f", t->kops);
    printf(", \"perf_index\": ");
    json_number(t->has_index, "%.1f", t->perf_index);
    printf("}}");
  }
  printf("\n  ]\n}\n");
}

/* ---- options ---------------------------------------------------------------------------- */

/* --policy A,B: the names point into argv (split in place). An empty name
 * ('', ',', 'A,,B') is an error, not a request for the default policy. */
static int add_policy_names(lab_args_t *a, char *list) {
  for (const char *p = list;; p++) {
    size_t n = strcspn(p, ",");
    if (n == 0) {
      fprintf(stderr, "tessera lab: --policy '%s': empty policy name (several go as --policy A,B; "
              "see --list-policies)\n", list);
      return -1;
    }
    p += n;
    if (!*p) break;
  }
  for (char *name = list; name;) {
    char *comma = strchr(name, ',');
    if (comma) *comma++ = '\0';
    /* Twice the same policy would run it twice, side by side with itself. */
    for (size_t i = 0; i < a->n_policy_names; i++)
      if (!strcmp(a->policy_names[i], name)) {
        fprintf(stderr, "tessera lab: --policy: '%s' is named twice\n", name);
        return -1;
      }
    const char **names = realloc(a->policy_names, (a->n_policy_names + 1) * sizeof *names);
    if (!names) return -1;
    a->policy_names = names;
    a->policy_names[a->n_policy_names++] = name;
    name = comma;
  }
  return 0;
}

static int parse_args(int argc, char **argv, lab_args_t *a) {
  enum { O_POLICY = 256, O_COMPARE, O_SYSTEM, O_LIST, O_ALIGN, O_CSV, O_JSON, O_CHECK,
         O_CHECK_EVERY, O_CHECK_BUDGET, O_CHECK_ONLY, O_HEAP_CAP, O_REFERENCE, O_RUNS, O_MM,
         O_FORMAT, O_TIMEOUT };
  static const struct option opts[] = {
    {"policy", required_argument, 0, O_POLICY}, {"compare", no_argument, 0, O_COMPARE},
    {"system", no_argument, 0, O_SYSTEM}, {"list-policies", no_argument, 0, O_LIST},
    {"align", required_argument, 0, O_ALIGN}, {"csv", no_argument, 0, O_CSV},
    {"json", no_argument, 0, O_JSON}, {"check", no_argument, 0, O_CHECK},
    {"check-every", required_argument, 0, O_CHECK_EVERY},
    {"check-budget", required_argument, 0, O_CHECK_BUDGET},
    {"check-only", no_argument, 0, O_CHECK_ONLY}, {"heap-cap", required_argument, 0, O_HEAP_CAP},
    {"reference", required_argument, 0, O_REFERENCE}, {"runs", required_argument, 0, O_RUNS},
    {"mm", required_argument, 0, O_MM}, {"format", required_argument, 0, O_FORMAT},
    {"timeout", required_argument, 0, O_TIMEOUT},
    {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
  };
  a->cfg.runs = DEFAULT_RUNS;
  a->format = TRACE_FORMAT_AUTO;
  bool csv = false, json = false;
  uint64_t v;
  int c;
  optind = 1;
  opterr = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_POLICY:
      if (add_policy_names(a, optarg) < 0) return -1;
      break;
    case O_MM:
      if (a->mm_path) {
        fprintf(stderr, "tessera lab: --mm: one student mm.c per run\n");
        return -1;
      }
      a->mm_path = optarg;
      break;
    case O_FORMAT:
      if (!strcmp(optarg, "auto")) a->format = TRACE_FORMAT_AUTO;
      else if (!strcmp(optarg, "classic")) a->format = TRACE_FORMAT_CLASSIC;
      else if (!strcmp(optarg, "cmu64")) a->format = TRACE_FORMAT_CMU64;
      else if (!strcmp(optarg, "weighted")) a->format = TRACE_FORMAT_WEIGHTED;
      else {
        fprintf(stderr, "tessera lab: --format must be auto, classic, cmu64 or weighted, not '%s'\n",
                optarg);
        return -1;
      }
      break;
    case O_TIMEOUT:
      if (parse_count(optarg, 0, 86400, &v)) {
        fprintf(stderr, "tessera lab: --timeout needs seconds from 0 (no limit) to 86400, not '%s'\n",
                optarg);
        return -1;
      }
      a->cfg.timeout_s = (unsigned)v;
      a->timeout_given = true;
      break;
    case O_COMPARE: a->compare = true; break;
    case O_SYSTEM: a->system = true; break;
    case O_LIST: a->list_policies = true; break;
    case O_ALIGN:
      if (strcmp(optarg, "8") && strcmp(optarg, "16")) {
        fprintf(stderr, "tessera lab: --align must be 8 or 16, not '%s'\n", optarg);
        return -1;
      }
      a->cfg.align = (size_t)atoi(optarg);
      break;
    case O_CSV: csv = true; break;
    case O_JSON: json = true; break;
    case O_CHECK: if (!a->cfg.check_every) a->cfg.check_every = 1; break;
    case O_CHECK_EVERY:
      if (parse_count(optarg, 1, UINT32_MAX, &v)) {
        fprintf(stderr, "tessera lab: --check-every needs a positive count, not '%s'\n", optarg);
        return -1;
      }
      a->cfg.check_every = (size_t)v;
      break;
    case O_CHECK_BUDGET:
      if (parse_count(optarg, 1, UINT32_MAX, &v)) {
        fprintf(stderr, "tessera lab: --check-budget needs a positive count, not '%s'\n", optarg);
        return -1;
      }
      a->cfg.check_budget = (size_t)v;  /* a cap on --check/--check-every, nothing alone */
      break;
    case O_CHECK_ONLY: a->cfg.check_only = true; break;
    case O_HEAP_CAP:
      if (parse_bytes(optarg, &v) || v < 4096 || v > ((uint64_t)1 << 46)) {
        fprintf(stderr, "tessera lab: --heap-cap needs a size from 4K to 64T (e.g. 20M), not '%s'\n",
                optarg);
        return -1;
      }
      a->heap_cap = (size_t)v;
      break;
    case O_REFERENCE: {
      char *end;
      errno = 0;
      double r = strtod(optarg, &end);
      if (errno || *end || end == optarg || !(r > 0) || !isfinite(r)) {
        fprintf(stderr, "tessera lab: --reference needs a positive Kops/s value, not '%s'\n", optarg);
        return -1;
      }
      a->reference_kops = r;
      break;
    }
    case O_RUNS:
      if (parse_count(optarg, 1, 64, &v)) {
        fprintf(stderr, "tessera lab: --runs needs a count from 1 to 64, not '%s'\n", optarg);
        return -1;
      }
      a->cfg.runs = (unsigned)v;
      break;
    case 'h': lab_usage(stdout); exit(tessera_stdout_status(0));
    default: return -1;  /* getopt printed why */
    }
  }
  if (csv && json) {
    fprintf(stderr, "tessera lab: --csv and --json exclude each other\n");
    return -1;
  }
  if (a->compare && a->n_policy_names) {
    fprintf(stderr, "tessera lab: --policy and --compare exclude each other\n");
    return -1;
  }
  a->output = csv ? OUT_CSV : json ? OUT_JSON : OUT_TABLE;
  a->paths = argv + optind;
  a->n_paths = argc - optind;
  return 0;
}

/* The results are the point: output lost on a full disk or a closed pipe is
 * an error (as in `lab gen`), not a silent success. Returns 0 when all of
 * standard output was written. */
static int stdout_written(void) {
  if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
  fprintf(stderr, "tessera lab: cannot write the results to standard output: %s\n", strerror(errno));
  return -1;
}

static void list_policies(void) {
  const lab_policy_t *def = lab_policy_default();
  for (const lab_policy_t *const *p = lab_policies(); *p; p++)
    printf("%c %-22s %s\n", *p == def ? '*' : ' ', (*p)->name, (*p)->description);
  printf("  %-22s %s\n", "system", driver_system_policy()->description);
}

static int setup_heap(size_t requested) {
  if (requested) {
    if (mem_init_cap(requested) == 0) return 0;
    fprintf(stderr, "tessera lab: cannot reserve a %zu-byte heap: %s\n", requested, strerror(errno));
    return -1;
  }
  /* The default is address space only; where the system refuses that much
   * (strict overcommit, ulimit -v), settle for less. */
  for (size_t cap = DEFAULT_HEAP_CAP; cap >= MIN_HEAP_CAP; cap /= 2)
    if (mem_init_cap(cap) == 0) return 0;
  fprintf(stderr, "tessera lab: cannot reserve the simulated heap: %s\n", strerror(errno));
  return -1;
}

int cmd_lab(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "gen")) return cmd_lab_gen(argc - 1, argv + 1);
  lab_args_t a;
  memset(&a, 0, sizeof a);
  if (parse_args(argc, argv, &a) < 0) {
    fprintf(stderr, "Run 'tessera lab --help' for the options.\n");
    free(a.policy_names);
    return 2;
  }
  if (a.list_policies) {
    list_policies();
    free(a.policy_names);
    return stdout_written() ? 2 : 0;
  }

  /* Policies to run, in the order asked (registry order for --compare). */
  const lab_policy_t **chosen = calloc(66 + a.n_policy_names, sizeof *chosen); /* 63 + system + mm */
  size_t n_chosen = 0;
  int status = 2;
  trace_list_t traces = {0};
  policy_run_t *runs = NULL;
  driver_t *driver = NULL;
  policy_run_t sys_run = {.policy = driver_system_policy()};
  const lab_policy_t *mm_policy = NULL; /* --mm's, once loaded */
  if (!chosen) goto out;
  if (a.compare) {
    for (const lab_policy_t *const *p = lab_policies(); *p && n_chosen < 63; p++)
      chosen[n_chosen++] = *p;
  } else {
    for (size_t i = 0; i < a.n_policy_names; i++) {
      const lab_policy_t *p = lab_policy_find(a.policy_names[i]);
      if (!p && !strcmp(a.policy_names[i], "system")) p = driver_system_policy();
      if (!p) {
        fprintf(stderr, "tessera lab: no policy named '%s' (see --list-policies)\n",
                a.policy_names[i]);
        goto out;
      }
      chosen[n_chosen++] = p;
    }
    if (n_chosen == 0 && !a.system && !a.mm_path) chosen[n_chosen++] = lab_policy_default();
  }
  if (a.mm_path) {
    char why[512];
    const lab_policy_t *mm = lab_student_load(a.mm_path, why, sizeof why);
    if (!mm) {
      fprintf(stderr, "tessera lab: --mm: %s\n", why);
      goto out;
    }
    chosen[n_chosen++] = mm;
    mm_policy = mm;
  }
  if (a.system) {
    bool have = false;
    for (size_t i = 0; i < n_chosen; i++) have |= driver_is_system(chosen[i]);
    if (!have) chosen[n_chosen++] = driver_system_policy();
  }

  /* Every input is read and checked before anything runs. */
  bool demo = a.n_paths == 0;
  for (int i = 0; i < a.n_paths; i++) {
    struct stat st;
    if (stat(a.paths[i], &st) != 0) {
      int e = errno;
      bool is_policy = lab_policy_find(a.paths[i]) || !strcmp(a.paths[i], "system");
      fprintf(stderr, "%s: cannot open: %s%s\n", a.paths[i], strerror(e),
              is_policy ? " (a policy name: several policies go as --policy A,B)" : "");
      goto out;
    }
    if ((S_ISDIR(st.st_mode) ? load_dir(&traces, a.paths[i], a.format) : load_one(&traces, a.paths[i], a.format)) < 0)
      goto out;
  }
  if (demo && load_demo(&traces) < 0) goto out;
  if (setup_heap(a.heap_cap) < 0) goto out;
  driver = driver_new();
  runs = calloc(n_chosen + 1, sizeof *runs);
  if (!driver || !runs) {
    fprintf(stderr, "tessera lab: out of memory\n");
    goto out;
  }
  timeout_for_report = a.cfg.timeout_s;
  install_crash_report();
  if (demo && a.output == OUT_TABLE)
    printf("No trace given: demo on %zu traces generated in memory "
           "('tessera lab gen PATTERN --seed %d').\n", traces.n, DEMO_SEED);

  /* The reference: the system allocator on the same traces, same run. */
  double ref = a.reference_kops;
  bool ref_measured = false;
  if (ref <= 0 && !a.cfg.check_only) {
    if (run_policy(driver, &sys_run, &traces, &a.cfg, false) < 0) goto out;
    driver_totals(sys_run.results, traces.n, 0, &sys_run.totals);
    /* Traces the system cannot replay (a 36 GB request refused by the
     * kernel) simply do not count towards the reference. */
    if (sys_run.totals.has_thru && sys_run.totals.kops > 0) {
      ref = sys_run.totals.kops;
      ref_measured = true;
    }
  }

  bool all_valid = true;
  for (size_t p = 0; p < n_chosen; p++) {
    runs[p].policy = chosen[p];
    if (driver_is_system(chosen[p]) && sys_run.results) {
      runs[p] = sys_run;  /* already measured: reuse, and print its errors */
      sys_run.results = NULL;
      for (size_t i = 0; i < traces.n; i++)
        if (!runs[p].results[i].valid) fprintf(stderr, "system: %s\n", runs[p].results[i].error);
    } else {
      /* A student's code may loop for ever: its passes have a limit unless
       * --timeout says otherwise; the built-in policies have none (the slow
       * textbook ones may take minutes on a large trace). */
      driver_config_t cfg = a.cfg;
      if (chosen[p] == mm_policy && !a.timeout_given) cfg.timeout_s = DEFAULT_MM_TIMEOUT;
      timeout_for_report = cfg.timeout_s;
      if (run_policy(driver, &runs[p], &traces, &cfg, true) < 0) goto out;
      timeout_for_report = a.cfg.timeout_s;
    }
    driver_totals(runs[p].results, traces.n, ref, &runs[p].totals);
    if (driver_is_system(chosen[p])) runs[p].totals.has_index = false;  /* no utilization */
    all_valid &= runs[p].totals.all_valid;
  }

  switch (a.output) {
  case OUT_CSV: print_csv(runs, n_chosen, &traces); break;
  case OUT_JSON: print_json(runs, n_chosen, &traces, &a.cfg, ref, ref_measured); break;
  case OUT_TABLE:
    print_reference(ref, ref_measured);
    if (n_chosen == 1) print_table(&runs[0], &traces, ref);
    else print_compare(runs, n_chosen, &traces, ref);
    break;
  }
  status = stdout_written() ? 2 : all_valid ? 0 : 1;

out:
  if (runs)
    for (size_t p = 0; p <= n_chosen; p++) free(runs[p].results);
  free(sys_run.results);
  free(runs);
  free(chosen);
  driver_free(driver);
  list_free(&traces);
  mem_deinit();
  free(a.policy_names);
  return status;
}
