/* lab.driver_cli: `tessera lab` as scripts see it. Every broken trace in
 * tests/lab/traces/broken is rejected with its exact `file:line: message`
 * and exit 2; usage errors exit 2; an invalid run (heap cap reached) exits
 * 1; the CSV has exactly the documented shape; --json, --compare, --help,
 * --list-policies, --check-budget and `lab gen` (deterministic, parseable)
 * behave. Also the command-line corners of the other tools that have no
 * test program of their own: `tessera bench` options and --from, `tessera
 * run --lib` with a file that is no library, the bench/fit programs'
 * options. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define TESSERA TESSERA_BINARY_DIR "/tessera"
#define TRACES TESSERA_SOURCE_DIR "/tests/lab/traces"

typedef struct run_s {
  int status;
  char out[1 << 16];
  char err[1 << 14];
} run_t;

static run_t run_buf;

/* Run program with the arguments given in args (passed to sh), capturing
 * stdout and stderr separately. */
static run_t *run_program(const char *program, const char *args) {
  char cmd[4096], out_path[] = "/tmp/tessera-cli-out-XXXXXX", err_path[] = "/tmp/tessera-cli-err-XXXXXX";
  int fo = mkstemp(out_path), fe = mkstemp(err_path);
  close(fo);
  close(fe);
  snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s", program, args, out_path, err_path);
  int st = system(cmd);
  run_buf.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  FILE *f = fopen(out_path, "r");
  size_t n = f ? fread(run_buf.out, 1, sizeof run_buf.out - 1, f) : 0;
  run_buf.out[n] = '\0';
  if (f) fclose(f);
  f = fopen(err_path, "r");
  n = f ? fread(run_buf.err, 1, sizeof run_buf.err - 1, f) : 0;
  run_buf.err[n] = '\0';
  if (f) fclose(f);
  unlink(out_path);
  unlink(err_path);
  return &run_buf;
}

static run_t *run(const char *args) { return run_program(TESSERA, args); }

/* A usage error: exit 2, nothing on stdout, and stderr says `what`. */
static void expect_usage_error(const char *args, const char *what) {
  run_t *r = run(args);
  if (r->status != 2 || !strstr(r->err, what) || r->out[0] != '\0') {
    fprintf(stderr, "'%s': expected exit 2 and \"%s\" on stderr\n  got exit %d, stderr \"%s\", stdout \"%.80s\"\n",
            args, what, r->status, r->err, r->out);
    failures++;
  }
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

static void expect_broken(const char *file, const char *message) {
  char args[1024], want[1024];
  snprintf(args, sizeof args, "lab --check-only %s/broken/%s", TRACES, file);
  snprintf(want, sizeof want, "%s/broken/%s:%s\n", TRACES, file, message);
  run_t *r = run(args);
  if (r->status != 2 || strcmp(r->err, want) != 0 || r->out[0] != '\0') {
    fprintf(stderr, "%s: expected exit 2 and \"%s\"\n  got exit %d, stderr \"%s\", stdout \"%.80s\"\n",
            file, want, r->status, r->err, r->out);
    failures++;
  }
}

static void missing_file(void) {
  run_t *r = run("lab --check-only " TRACES "/broken/does-not-exist.rep");
  CHECK(r->status == 2 && r->out[0] == '\0');
  CHECK(!strcmp(r->err, TRACES "/broken/does-not-exist.rep: cannot open: No such file or directory\n"));
}

/* Live payload past 2^64 bytes takes 65,536 live blocks of 2^48 bytes (1.7
 * MB of text): written here rather than committed. */
static void live_overflow(void) {
  char path[] = "/tmp/tessera-overflow-XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  CHECK(f != NULL);
  if (!f) return;
  fprintf(f, "100\n65536\n65536\n1\n");
  for (int i = 0; i < 65536; i++) fprintf(f, "a %d 281474976710656\n", i);
  fclose(f);
  char args[256], want[256];
  snprintf(args, sizeof args, "lab --check-only %s", path);
  snprintf(want, sizeof want, "%s:65540: total live payload exceeds 2^64 bytes\n", path);
  run_t *r = run(args);
  CHECK(r->status == 2 && !strcmp(r->err, want) && r->out[0] == '\0');
  unlink(path);
}

static void test_broken_traces(void) {
  expect_broken("empty.rep", "1: empty trace (expected 4 header lines)");
  expect_broken("header-short.rep", "3: file ends inside the header (3 of 4 header lines)");
  expect_broken("header-garbage.rep", "2: header line 2 (num_ids): expected a number, got 'lots'");
  expect_broken("header-negative.rep", "3: header line 3 (num_ops): negative value -6");
  expect_broken("overflow-header.rep",
                "2: header line 2 (num_ids): 99999999999999999999999 does not fit in 64 bits");
  expect_broken("truncated.rep", "9: file ends after 4 of the 6 requests announced in the header");
  expect_broken("unknown-op.rep", "6: unknown request 'x' (expected a, f or r)");
  expect_broken("negative-size.rep", "5: negative size -5");
  expect_broken("garbage-size.rep", "5: size '12abc' is not a number");
  expect_broken("overflow-size.rep", "5: size 99999999999999999999 does not fit in 64 bits");
  expect_broken("huge-size.rep", "5: size 300000000000000 is larger than any heap (limit 2^48 bytes)");
  expect_broken("id-out-of-range.rep", "5: id 7 out of range (num_ids is 3)");
  expect_broken("negative-id.rep",
                "5: negative id -3 in an 'a' request (only 'f' may name one: free(NULL))");
  expect_broken("missing-size.rep", "5: 'a' request without a size");
  expect_broken("extra-field.rep", "6: unexpected text after the 'f' request: '8'");
  expect_broken("double-free.rep", "7: id 0 freed twice (first freed at line 6)");
  expect_broken("realloc-after-free.rep", "7: realloc of id 0 after it was freed (at line 6)");
  expect_broken("alloc-twice.rep", "6: id 0 allocated again while live (allocated at line 5)");
  expect_broken("binary-junk.rep", "6: unexpected byte 0xff in column 3");
  expect_broken("header-two-numbers.rep",
                "2: header line 2 (num_ids): expected one number, got more text ('3')");
  expect_broken("missing-id.rep", "6: 'f' request without an id");
  expect_broken("garbage-id.rep", "5: id 'x' is not a number");
  expect_broken("overflow-id.rep", "5: id 99999999999999999999 does not fit in 64 bits");

  /* Unreadable: the same words as the parser's own "cannot open". */
  missing_file();
  live_overflow();

  /* A broken trace among good ones stops everything before any run. */
  run_t *r = run("lab --check-only " TRACES "/good " TRACES "/broken/truncated.rep");
  CHECK(r->status == 2 && r->out[0] == '\0');
  CHECK(strstr(r->err, "truncated.rep:9: file ends after 4 of the 6 requests") != NULL);
}

/* Only regular files are read: /dev/zero or a FIFO would be read without
 * end (timeout stops the command if they are not refused), and a NUL byte
 * stops the reading where it is found, even after the requests. */
static void test_not_a_text_file(void) {
  run_t *r = run_program("timeout 20 " TESSERA, "lab --check-only /dev/zero");
  CHECK(r->status == 2 && !strcmp(r->err, "/dev/zero: not a regular file (a character device)\n"));
  char dir[] = "/tmp/tessera-notfile-XXXXXX", args[600], want[600];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(args, sizeof args, "mkfifo %s/fifo.rep && printf '1\\n1\\n1\\n1\\na 0 8\\n\\0\\n' >%s/nul.rep", dir, dir);
  CHECK(system(args) == 0);
  snprintf(args, sizeof args, "lab --check-only %s/fifo.rep", dir);
  r = run_program("timeout 20 " TESSERA, args);
  snprintf(want, sizeof want, "%s/fifo.rep: not a regular file (a pipe)\n", dir);
  CHECK(r->status == 2 && !strcmp(r->err, want));
  snprintf(args, sizeof args, "lab --check-only %s/nul.rep", dir);
  r = run(args);
  snprintf(want, sizeof want, "%s/nul.rep:6: unexpected byte 0x00 in column 1\n", dir);
  CHECK(r->status == 2 && !strcmp(r->err, want) && r->out[0] == '\0');
  /* The same NUL after 70 KB of stray lines (past the first block read):
   * refused too, at its own line (it was accepted: only the first block was
   * looked at, and the parser ignores junk after the requests). */
  snprintf(args, sizeof args, "{ printf '1\\n1\\n1\\n1\\na 0 8\\n'; i=0; while [ $i -lt 7000 ]; do "
           "echo 'stray line'; i=$((i + 1)); done; printf 'x\\0\\n'; } >%s/nul-late.rep", dir);
  CHECK(system(args) == 0);
  snprintf(args, sizeof args, "lab --check-only %s/nul-late.rep", dir);
  r = run(args);
  snprintf(want, sizeof want, "%s/nul-late.rep:7006: unexpected byte 0x00 in column 2\n", dir);
  if (!(r->status == 2 && !strcmp(r->err, want) && r->out[0] == '\0')) {
    fprintf(stderr, "nul-late.rep: exit %d, stderr \"%s\"\n", r->status, r->err);
    failures++;
  }
  snprintf(args, sizeof args, "rm -rf %s", dir);
  CHECK(system(args) == 0);
}

static void test_usage_errors(void) {
  static const char *const bad[] = {
    "lab --no-such-option", "lab --align 12", "lab --policy no-such-policy",
    "lab --csv --json", "lab --runs 0", "lab --heap-cap 12Q", "lab --reference -5",
    "lab --check-every 0", "lab --check-budget x", "lab " TRACES "/does-not-exist.rep", "lab " TRACES "/broken/../",
    "lab gen", "lab gen nonsense -o /dev/null", "lab gen random", "lab --compare --policy system",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    run_t *r = run(bad[i]);
    if (r->status != 2 || r->err[0] == '\0') {
      fprintf(stderr, "'%s': expected exit 2 with a message, got %d \"%s\"\n", bad[i], r->status,
              r->err);
      failures++;
    }
  }
  /* `lab TRACES/` holds only folders: no *.rep in it. */
  run_t *r = run("lab " TRACES);
  CHECK(r->status == 2 && strstr(r->err, "no *.rep trace in this directory"));

  /* An empty policy name is not a request for the default policy. */
  expect_usage_error("lab --check-only --policy '' " TRACES "/good", "--policy '': empty policy name");
  expect_usage_error("lab --check-only --policy , " TRACES "/good", "--policy ',': empty policy name");
  expect_usage_error("lab --check-only --policy implicit-first,,tree-best " TRACES "/good",
                     "empty policy name");
  /* A policy named twice (in one list or two --policy) is refused. */
  expect_usage_error("lab --check-only --policy tree-best,tree-best " TRACES "/good",
                     "--policy: 'tree-best' is named twice");
  expect_usage_error("lab --check-only --policy tree-best --policy implicit-first,tree-best " TRACES "/good",
                     "--policy: 'tree-best' is named twice");
  /* Counts and sizes are digits: no blank, no sign (' -3' was 2^64-3). */
  expect_usage_error("lab gen mix --seed ' -3' -o /dev/null", "bad value ' -3' for --seed");
  expect_usage_error("lab gen mix --seed +3 -o /dev/null", "bad value '+3' for --seed");
  expect_usage_error("lab gen mix --ops ' 100' -o /dev/null", "bad value ' 100' for --ops");
  expect_usage_error("lab --runs ' 2' " TRACES "/good", "--runs needs a count from 1 to 64");
  expect_usage_error("lab --heap-cap ' -1M' " TRACES "/good", "--heap-cap needs a size from 4K to 64T");
  r = run("lab --check-only --csv --policy implicit-first,tree-best " TRACES "/good/classic-small.rep");
  CHECK(r->status == 0 && strstr(r->out, "\nimplicit-first,classic-small.rep,yes,") &&
        strstr(r->out, "\ntree-best,classic-small.rep,yes,"));
}

/* A folder named like a trace is skipped when a directory is scanned. */
/* Results that cannot be written are an error, not a success. */
static void test_output_lost(void) {
  if (access("/dev/full", W_OK) != 0) return;
  static const char *const args[] = {"--csv --check-only " TRACES "/good/classic-small.rep", "--list-policies"};
  for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "out=$(%s lab %s 2>&1 >/dev/full); rc=$?; [ $rc -eq 2 ] && "
             "echo \"$out\" | grep -q 'tessera lab: cannot write the results to standard output: No space left'",
             TESSERA, args[i]);
    if (system(cmd) != 0) {
      fprintf(stderr, "'lab %s >/dev/full': expected exit 2 and a message\n", args[i]);
      failures++;
    }
  }
}

static void test_dir_scan(void) {
  char dir[] = "/tmp/tessera-scan-XXXXXX", args[512];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(args, sizeof args, "mkdir %s/folder.rep && cp " TRACES "/good/classic-small.rep %s/", dir, dir);
  CHECK(system(args) == 0);
  snprintf(args, sizeof args, "lab --check-only --csv %s", dir);
  run_t *r = run(args);
  CHECK(r->status == 0 && strstr(r->out, ",classic-small.rep,yes,") && !strstr(r->out, "folder.rep"));
  snprintf(args, sizeof args, "rm %s/classic-small.rep && lab_out=$(%s lab --check-only %s 2>&1); "
           "echo \"$lab_out\" | grep -q 'no \\*.rep trace in this directory'", dir, TESSERA, dir);
  CHECK(system(args) == 0);
  snprintf(args, sizeof args, "rm -rf %s", dir);
  CHECK(system(args) == 0);
}

/* --check-budget only caps --check/--check-every (the JSON's "checks":
 * checker runs per trace, the one at the end included), and a budget of B
 * never gives more than B runs: classic-small has 10 ops, so B = 6 means
 * every 2nd op (10 / 6 rounded down would be every op, 10 runs + 1). */
static void test_check_budget(void) {
  const char *trace = " " TRACES "/good/classic-small.rep";
  char args[512];
  static const struct { const char *options; const char *checks; } cases[] = {
    {"", "\"checks\": 1,"},
    {"--check-budget 6", "\"checks\": 1,"},
    {"--check", "\"checks\": 10,"},
    {"--check --check-budget 6", "\"checks\": 5,"},
    {"--check --check-budget 3", "\"checks\": 3,"},
    {"--check-every 3 --check-budget 100", "\"checks\": 4,"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(args, sizeof args, "lab --json --check-only --policy implicit-first %s%s", cases[i].options, trace);
    run_t *r = run(args);
    if (r->status != 0 || !strstr(r->out, cases[i].checks)) {
      fprintf(stderr, "'%s': expected %s in the JSON, got exit %d:\n%s\n", args, cases[i].checks, r->status,
              r->out);
      failures++;
    }
  }
}

/* Count the fields of one CSV line (no quoted commas in our names). */
static int fields(const char *line, char out[][64], int max) {
  int n = 0;
  const char *s = line;
  size_t line_len = strcspn(line, "\n");
  while (n < max) {
    const char *comma = memchr(s, ',', line_len - (size_t)(s - line));
    size_t len = comma ? (size_t)(comma - s) : strcspn(s, "\n");
    snprintf(out[n], 64, "%.*s", (int)len, s);
    n++;
    if (!comma) break;
    s = comma + 1;
  }
  return n;
}

static void test_csv(void) {
  run_t *r = run("lab --csv --runs 1 --policy system," "$(" TESSERA " lab --list-policies | sed -n 's/^\\* *\\([^ ]*\\).*/\\1/p')" " " TRACES "/good");
  CHECK(r->status == 0);
  const char *header = "policy,trace,valid,util,ops,secs,kops,perf_index\n";
  CHECK(strncmp(r->out, header, strlen(header)) == 0);
  int rows = 0, totals = 0;
  char f[9][64];
  for (char *line = strchr(r->out, '\n') + 1; line && *line; line = strchr(line, '\n') + 1) {
    int n = fields(line, f, 9);
    CHECK(n == 8);
    CHECK(!strcmp(f[2], "yes"));
    bool system = !strcmp(f[0], "system");
    if (!strcmp(f[1], "TOTAL")) {
      totals++;
      /* The perf index lives on TOTAL rows only (none for the system). */
      if (!system) {
        double index = atof(f[7]);
        CHECK(f[7][0] != '\0' && index > 0 && index <= 100);
      }
    } else {
      rows++;
      CHECK(f[7][0] == '\0');
      CHECK(f[5][0] != '\0' && f[6][0] != '\0');  /* timed: secs, Kops/s */
    }
    if (!system) {
      double util = atof(f[3]);
      CHECK(f[3][0] != '\0' && util > 0 && util <= 1);
    } else {
      CHECK(f[3][0] == '\0');
    }
  }
  CHECK(rows == 6 && totals == 2);  /* 3 good traces x 2 policies */

  /* An invalid run: the heap cap is too small. Exit 1, valid=no, index 0. */
  r = run("lab --csv --check-only --heap-cap 1M " TRACES "/large/largemem.rep");
  CHECK(r->status == 1);
  CHECK(strstr(r->out, ",largemem.rep,no,,6,,,\n") != NULL);
  CHECK(strstr(r->out, ",TOTAL,no,,0,,,0.0\n") != NULL);
  CHECK(strstr(r->err, "largemem.rep:6: op 2 (a 1 36507238400): out of memory: a request of 36507238400 bytes "
                       "is larger than the whole heap cap of 1048576 bytes (--heap-cap)") != NULL);
}

static void test_outputs(void) {
  run_t *r = run("lab --json --check-only " TRACES "/good/classic-small.rep");
  CHECK(r->status == 0);
  CHECK(r->out[0] == '{' && strstr(r->out, "\"policies\": [") && strstr(r->out, "\"trace\": \"classic-small.rep\""));
  CHECK(strstr(r->out, "\"valid\": true") && strstr(r->out, "\"perf_index\": null"));

  r = run("lab --compare --check --check-only " TRACES "/good");
  CHECK(r->status == 0);
  CHECK(strstr(r->out, "Summary:") && strstr(r->out, "T2=weighted-realworld.rep"));
  for (char *line = r->out; *line; ) {  /* readable in 100 columns */
    size_t len = strcspn(line, "\n");
    CHECK(len <= 100);
    line += len + (line[len] == '\n');
  }
  CHECK(strstr(r->err, "weighted-realworld.rep:20: note: 2 lines after the last of the 14 requests ignored"));

  r = run("lab --runs 1 --reference 1000000 " TRACES "/good/classic-small.rep");
  CHECK(r->status == 0 && strstr(r->out, "Reference throughput: 1000000 Kops/s (--reference)"));
  CHECK(strstr(r->out, "Perf index = "));

  r = run("lab --help");
  static const char *const options[] = {"--policy", "--compare", "--system", "--list-policies",
    "--align", "--check", "--check-every", "--check-only", "--heap-cap", "--runs", "--reference",
    "--csv", "--json", "gen"};
  CHECK(r->status == 0);
  for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) CHECK(strstr(r->out, options[i]));

  r = run("lab --list-policies");
  CHECK(r->status == 0 && strstr(r->out, "\n* ") && strstr(r->out, "system"));
}

static void test_gen(void) {
  char dir[] = "/tmp/tessera-gen-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char args[512];
  snprintf(args, sizeof args, "lab gen mix --seed 9 --ops 2000 -o %s/a.rep", dir);
  CHECK(run(args)->status == 0);
  snprintf(args, sizeof args, "lab gen mix --seed 9 --ops 2000 -o %s/b.rep", dir);
  CHECK(run(args)->status == 0);
  snprintf(args, sizeof args, "lab gen mix --seed 10 --ops 2000 -o %s/c.rep", dir);
  CHECK(run(args)->status == 0);
  snprintf(args, sizeof args, "cmp -s %s/a.rep %s/b.rep", dir, dir);
  CHECK(system(args) == 0);
  snprintf(args, sizeof args, "cmp -s %s/a.rep %s/c.rep", dir, dir);
  CHECK(system(args) != 0);
  snprintf(args, sizeof args, "lab gen all --seed 2 --ops 600 -o %s/all", dir);
  CHECK(run(args)->status == 0);
  snprintf(args, sizeof args, "lab --check --check-only %s %s/all", dir, dir);
  run_t *r = run(args);
  CHECK(r->status == 0 && strstr(r->out, "realloc.rep") && strstr(r->out, "a.rep"));

  /* -o - is standard output: one trace, never a directory named '-'. */
  snprintf(args, sizeof args, "cd %s && %s lab gen all -o - >out 2>err; test $? -eq 2 && test ! -e ./- && "
           "grep -q \"'all' writes one file per pattern into a directory\" err && test ! -s out", dir, TESSERA);
  CHECK(system(args) == 0);
  r = run("lab gen struct --ops 100 -o -");
  CHECK(r->status == 0 && r->out[0] >= '1' && r->out[0] <= '9' && strstr(r->out, "\na 0 "));
  /* largemem's huge blocks need room: a small --max-size is refused. */
  snprintf(args, sizeof args, "lab gen largemem --max-size 1K -o %s/small.rep", dir);
  r = run(args);
  CHECK(r->status == 2 && strstr(r->err, "largemem needs --max-size of at least 6G"));
  snprintf(args, sizeof args, "%s/small.rep", dir);
  CHECK(!exists(args));
  snprintf(args, sizeof args, "lab gen largemem --max-size 6G -o %s/six.rep", dir);
  CHECK(run(args)->status == 0);
  snprintf(args, sizeof args, "rm -rf %s", dir);
  CHECK(system(args) == 0);
}

/* ---- the other tools ------------------------------------------------------ */

/* A results directory of two allocators, as a run of the suite leaves it. */
static void write_results(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/results.csv", dir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fprintf(f, "workload,allocator,threads,run,wall_s,cpu_s,peak_rss_kib,status,user_s,sys_s,work_s,extra\n");
  for (int run = 1; run <= 2; run++) {
    fprintf(f, "single,system,1,%d,0.200000,0.200000,2000,ok,0.200000,0.000000,0.190000,\n", run);
    fprintf(f, "single,tessera,1,%d,0.100000,0.100000,1500,ok,0.100000,0.000000,0.090000,\n", run);
  }
  fclose(f);
  snprintf(path, sizeof path, "%s/machine.txt", dir);
  f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fprintf(f, "date: 2026-11-22T04:56:12Z\ncommand: tessera bench --runs 2\n");
  fclose(f);
}

/* JSON is UTF-8: a path that is not (a Latin-1 name, byte 0xe9) is written
 * with U+FFFD for the broken byte (it was copied raw, and a JSON reader
 * refused the whole document); a UTF-8 name passes unchanged. Both for
 * `lab --json` (the trace's name and path) and for `bench`'s results.json
 * (the command and the notes of `--from DIR` name DIR). */
static void test_json_utf8(void) {
  char dir[] = "/tmp/tessera-json-XXXXXX", args[1024], json[700];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(args, sizeof args, "cp %s/good/classic-small.rep \"%s/caf\351.rep\" && "
           "cp %s/good/classic-small.rep \"%s/caf\303\251.rep\" && mkdir \"%s/r\351s\"",
           TRACES, dir, TRACES, dir, dir);
  CHECK(system(args) == 0);
  snprintf(args, sizeof args, "lab --json --check-only %s", dir);
  run_t *r = run(args);
  CHECK(r->status == 0);
  CHECK(strstr(r->out, "\"trace\": \"caf\\ufffd.rep\"") != NULL);
  CHECK(strstr(r->out, "\"trace\": \"caf\303\251.rep\"") != NULL);
  CHECK(strchr(r->out, '\351') == NULL);
  char from[600];
  snprintf(from, sizeof from, "%s/r\351s", dir);
  write_results(from);
  snprintf(args, sizeof args, "bench --from \"%s\" --no-charts", from);
  r = run(args);
  CHECK(r->status == 0);
  snprintf(json, sizeof json, "%s/results.json", from);
  FILE *f = fopen(json, "rb");
  CHECK(f != NULL);
  if (f) {
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    CHECK(strstr(text, "--from /tmp/tessera-json-") && strstr(text, "/r\\ufffds --no-charts"));
    CHECK(memchr(text, '\351', n) == NULL);
  }
  snprintf(args, sizeof args, "rm -rf %s", dir);
  CHECK(system(args) == 0);
}

static void test_bench(void) {
  /* Whole numbers and non-empty thread lists, each refused with a message. */
  expect_usage_error("bench --runs 1.5 --list", "--runs wants a whole number in 1..1000, not '1.5'");
  expect_usage_error("bench --threads 2.5 --list", "--threads wants a whole number in 1..1024, not '2.5'");
  expect_usage_error("bench --threads '' --list", "--threads wants thread counts separated by commas");
  expect_usage_error("bench --threads 2,,4 --list", "--threads wants thread counts separated by commas");
  CHECK(run("bench --threads 2,4 --list")->status == 0);

  /* --from: the baseline must be in the records, and nothing is written
   * when it is not; options that only shape a run are refused. */
  char dir[] = "/tmp/tessera-from-XXXXXX", args[1024], report[600], json[600];
  CHECK(mkdtemp(dir) != NULL);
  write_results(dir);
  snprintf(report, sizeof report, "%s/report.md", dir);
  snprintf(json, sizeof json, "%s/results.json", dir);
  snprintf(args, sizeof args, "bench --from %s --no-charts --baseline nope", dir);
  expect_usage_error(args, "baseline 'nope' is not among the allocators of");
  CHECK(strstr(run(args)->err, "results.csv (system, tessera)") != NULL);
  CHECK(!exists(report) && !exists(json));
  static const char *const run_only[] = {"--runs 2", "--workloads single", "--allocators system", "--quick",
                                         "--full", "--threads 2", "--scale 2", "--timeout 9",
                                         "--allocator x=/lib/x.so"};
  for (size_t i = 0; i < sizeof run_only / sizeof run_only[0]; i++) {
    char want[64];
    snprintf(args, sizeof args, "bench --from %s --no-charts %s", dir, run_only[i]);
    snprintf(want, sizeof want, "%.*s only shapes a run of the suite", (int)strcspn(run_only[i], " "),
             run_only[i]);
    expect_usage_error(args, want);
  }
  /* --out with --from is where the rebuilt report goes (it was refused as
   * an option of a run): DIR gets nothing (checked just below). */
  char out[600], out_report[700];
  snprintf(out, sizeof out, "%s/rebuilt", dir);
  snprintf(out_report, sizeof out_report, "%s/report.md", out);
  snprintf(args, sizeof args, "bench --from %s --no-charts --out %s --baseline tessera", dir, out);
  CHECK(run(args)->status == 0 && exists(out_report));
  CHECK(!exists(report) && !exists(json));
  snprintf(args, sizeof args, "bench --from %s --no-charts --baseline tessera --metric cpu", dir);
  run_t *r = run(args);
  CHECK(r->status == 0 && exists(report) && exists(json));
  snprintf(args, sizeof args, "grep -q '\"baseline\": \"tessera\"' %s", json);
  CHECK(system(args) == 0);
  /* Options that contradict each other are refused, not last-one-wins. */
  snprintf(args, sizeof args, "bench --from %s --list", dir);
  expect_usage_error(args, "--list and --from exclude each other");
  expect_usage_error("bench --quick --full --list", "--quick and --full exclude each other");
  expect_usage_error("bench --full --workloads single --quick --list", "--quick and --full exclude each other");
  /* A header and no record is no report; a directory named results.csv is
   * named as one (it was "empty file (no header)"). Exit 1, nothing written. */
  snprintf(args, sizeof args, "rm -f %s/report.md %s/results.json && head -n 1 %s/results.csv >%s/h && mv %s/h %s/results.csv",
           dir, dir, dir, dir, dir, dir);
  CHECK(system(args) == 0);
  snprintf(args, sizeof args, "bench --from %s --no-charts", dir);
  r = run(args);
  CHECK(r->status == 1 && strstr(r->err, "results.csv has no results (a header and no record)"));
  CHECK(!exists(report) && !exists(json));
  snprintf(args, sizeof args, "rm %s/results.csv && mkdir %s/results.csv", dir, dir);
  CHECK(system(args) == 0);
  snprintf(args, sizeof args, "bench --from %s --no-charts", dir);
  r = run(args);
  CHECK(r->status == 1 && strstr(r->err, "results.csv: a directory, not a results file"));
  snprintf(args, sizeof args, "rm -rf %s", dir);
  CHECK(system(args) == 0);
}

/* `bench --allocator NAME=PATH` takes only what `tessera run` would preload:
 * a file that is no shared library, a missing file or a path the loader
 * splits is a usage error before anything runs (the rows labelled NAME
 * would be glibc's). libtessera.so itself in such a directory is skipped. */
static void test_bench_allocator(void) {
  expect_usage_error("bench --allocator foo=/etc/passwd --list",
                     "--allocator foo=/etc/passwd: /etc/passwd cannot be preloaded: not an ELF file");
  expect_usage_error("bench --allocator foo=/nonexistent.so --workloads single --runs 1 --no-charts --out /tmp/x",
                     "--allocator foo=/nonexistent.so: cannot read /nonexistent.so: No such file or directory");
  if (!exists(TESSERA_BINARY_DIR "/libtessera.so") || !exists(TESSERA_BINARY_DIR "/bench/bench_single")) return;
  char dir[] = "/tmp/tessera-alloc-XXXXXX", args[2048];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(args, sizeof args, "mkdir -p '%s/with space/bench' && cp " TESSERA " " TESSERA_BINARY_DIR
           "/libtessera.so '%s/with space/' && cp " TESSERA_BINARY_DIR "/bench/bench_single '%s/with space/bench/'",
           dir, dir, dir);
  CHECK(system(args) == 0);
  snprintf(args, sizeof args, "bench --allocator 'foo=%s/with space/libtessera.so' --list", dir);
  expect_usage_error(args, "cannot be preloaded: its path contains a space or a colon");
  /* The copy of tessera finds its libtessera.so next to itself, in 'with space/'. */
  char prog[600];
  snprintf(prog, sizeof prog, "'%s/with space/tessera'", dir);
  snprintf(args, sizeof args, "bench --workloads single --allocators tessera --runs 1 --scale 0.01 --no-charts "
           "--out %s/out", dir);
  run_t *r = run_program(prog, args);
  CHECK(r->status == 2 && strstr(r->out, "libtessera.so cannot be preloaded: its path contains a space") &&
        strstr(r->err, "no allocator to run"));
  snprintf(args, sizeof args, "rm -rf %s", dir);
  CHECK(system(args) == 0);
}

/* `run --lib` with a file the loader would skip (it would then run the
 * program on the C library's malloc): exit 2, the file named. */
static void test_run_lib(void) {
  expect_usage_error("run --lib /etc/passwd true", "/etc/passwd cannot be preloaded: not an ELF file");
  /* The ELF header of an x86-64-style executable (ET_EXEC), little-endian. */
  static const unsigned char exec_header[18] = {0x7f, 'E', 'L', 'F', 2, 1, 1, [16] = 2, [17] = 0};
  char path[] = "/tmp/tessera-notlib-XXXXXX", args[512];
  int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, exec_header, sizeof exec_header) == (ssize_t)sizeof exec_header);
  if (fd >= 0) close(fd);
  snprintf(args, sizeof args, "run --lib %s true", path);
  expect_usage_error(args, "cannot be preloaded: an ELF file but not a shared object");
  unlink(path);
  if (exists(TESSERA_BINARY_DIR "/libtessera.so"))  /* the real library still passes */
    CHECK(run("run --lib " TESSERA_BINARY_DIR "/libtessera.so true")->status == 0);
}

/* The bench/fit programs: --help is not an error, a missing value is named. */
static void test_fit_options(void) {
  const char *fit = TESSERA_BINARY_DIR "/bench/fit_equal";
  if (access(fit, X_OK) != 0) {
    printf("note: %s is not built; its option checks skipped\n", fit);
    return;
  }
  run_t *r = run_program(fit, "--help");
  CHECK(r->status == 0 && strstr(r->out, "usage: ") && strstr(r->out, "--impl") && r->err[0] == '\0');
  r = run_program(fit, "--impl");
  CHECK(r->status == 2 && strstr(r->err, "--impl needs a value: ff, bf, malloc or null"));
  r = run_program(fit, "--iters");
  CHECK(r->status == 2 && strstr(r->err, "--iters needs a positive integer"));
  /* Past a long (strtol clamps to LONG_MAX: it ran for ever), a leading
   * blank or sign: refused. */
  char bounded[600];  /* without the check it would never end */
  snprintf(bounded, sizeof bounded, "timeout 20 %s", fit);
  r = run_program(bounded, "--iters 99999999999999999999");
  CHECK(r->status == 2 && strstr(r->err, "--iters needs a positive integer, at most 1000000000"));
  r = run_program(fit, "--iters ' 5'");
  CHECK(r->status == 2 && strstr(r->err, "--iters needs a positive integer"));
  r = run_program(fit, "--seed ' -1'");
  CHECK(r->status == 2 && strstr(r->err, "--seed needs an integer"));
  r = run_program(fit, "--frobnicate");
  CHECK(r->status == 2 && strstr(r->err, "unknown option"));

  /* --impl malloc's fragmentation (docs/LAB.md): a figure when mallinfo2
   * follows the malloc in use (glibc's; libtessera's, preloaded, answers
   * for its own heap), n/a when it does not (mimalloc leaves glibc's). */
#ifndef TESSERA_SANITIZED /* a sanitizer's malloc has no mallinfo2 figures, and no preload replaces it */
  char preloaded[600];
  r = run_program(fit, "--impl malloc --iters 4");
  CHECK(r->status == 0 && strstr(r->out, " fragmentation=0.") != NULL);
  if (exists(TESSERA_BINARY_DIR "/libtessera.so")) {
    snprintf(preloaded, sizeof preloaded, "LD_PRELOAD=%s/libtessera.so %s", TESSERA_BINARY_DIR, fit);
    r = run_program(preloaded, "--impl malloc --iters 4");
    CHECK(r->status == 0 && strstr(r->out, " fragmentation=0.") != NULL);
  }
  const char *mimalloc = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2";
  if (exists(mimalloc)) {
    snprintf(preloaded, sizeof preloaded, "LD_PRELOAD=%s %s", mimalloc, fit);
    r = run_program(preloaded, "--impl malloc --iters 4");
    CHECK(r->status == 0 && strstr(r->out, " fragmentation=n/a ") != NULL);
  }
#endif

  /* fit_matrix.sh: an option without its value, or no workload at all. */
  const char *matrix = "sh " TESSERA_BINARY_DIR "/bench/fit_matrix.sh";
  r = run_program(matrix, "--bin");
  CHECK(r->status == 2 && strstr(r->err, "fit_matrix.sh: --bin needs a value") && r->out[0] == '\0');
  r = run_program(matrix, "--workloads");
  CHECK(r->status == 2 && strstr(r->err, "fit_matrix.sh: --workloads needs a value"));
  r = run_program(matrix, "--workloads ''");
  CHECK(r->status == 2 && strstr(r->err, "--workloads needs at least one of") && r->out[0] == '\0');
}

/* --format: the classic reading of a header that also reads as weighted
 * (line 1 = 0, line 4 = 1), the note that says so, and bad values. */
static void test_format(void) {
  const char *path = "/tmp/tessera-cli-format.rep";
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs("0\n2\n4\n1\na 0 8\na 1 8\nf 0\nf 1\n", f);
  fclose(f);
  run_t *r = run("lab --check-only --csv /tmp/tessera-cli-format.rep");
  CHECK(r->status == 0);
  CHECK(strstr(r->err, "/tmp/tessera-cli-format.rep:1: note: header read as weighted (weight 0, flag 1)") != NULL);
  r = run("lab --check-only --format classic /tmp/tessera-cli-format.rep");
  CHECK(r->status == 0 && r->err[0] == '\0');
  /* classic: no weight column, replayed at 8 */
  CHECK(strstr(r->out, " w ") == NULL && strstr(r->out, "   yes      8 ") != NULL);
  r = run("lab --check-only --format weighted /tmp/tessera-cli-format.rep");
  CHECK(r->status == 0 && r->err[0] == '\0');
  expect_usage_error("lab --check-only --format cmu /tmp/tessera-cli-format.rep",
                     "--format must be auto, classic, cmu64 or weighted, not 'cmu'");
  r = run("lab --check-only --format weighted " TRACES "/good/classic-small.rep");
  CHECK(r->status == 2 && strstr(r->err, "classic-small.rep:1: header line 1 (weight): 20000 is not a weight (0-3) of a weighted header"));
  unlink(path);
}

int main(void) {
  if (access(TESSERA, X_OK) != 0) {
    fprintf(stderr, "%s is not built\n", TESSERA);
    return 1;
  }
  test_broken_traces();
  test_not_a_text_file();
  test_usage_errors();
  test_format();
  test_csv();
  test_outputs();
  test_dir_scan();
  test_output_lost();
  test_check_budget();
  test_gen();
  test_json_utf8();
  test_bench();
  test_bench_allocator();
  test_run_lib();
  test_fit_options();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("lab.driver_cli: all checks passed\n");
  return 0;
}
