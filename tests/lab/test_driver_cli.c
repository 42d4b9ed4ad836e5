/* lab.driver_cli: `tessera lab` as scripts see it. Every broken trace in
 * tests/lab/traces/broken is rejected with its exact `file:line: message`
 * and exit 2; usage errors exit 2; an invalid run (heap cap reached) exits
 * 1; the CSV has exactly the documented shape; --json, --compare, --help,
 * --list-policies and `lab gen` (deterministic, parseable) behave. */
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

/* Run tessera with the arguments given in cmd (passed to sh), capturing
 * stdout and stderr separately. */
static run_t *run(const char *args) {
  char cmd[4096], out_path[] = "/tmp/tessera-cli-out-XXXXXX", err_path[] = "/tmp/tessera-cli-err-XXXXXX";
  int fo = mkstemp(out_path), fe = mkstemp(err_path);
  close(fo);
  close(fe);
  snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s", TESSERA, args, out_path, err_path);
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

  /* A broken trace among good ones stops everything before any run. */
  run_t *r = run("lab --check-only " TRACES "/good " TRACES "/broken/truncated.rep");
  CHECK(r->status == 2 && r->out[0] == '\0');
  CHECK(strstr(r->err, "truncated.rep:9: file ends after 4 of the 6 requests") != NULL);
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
  CHECK(strstr(r->err, "largemem.rep:6: op 2 (a 1 36507238400): out of memory: the heap (") != NULL);
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
  snprintf(args, sizeof args, "rm -rf %s", dir);
  CHECK(system(args) == 0);
}

int main(void) {
  if (access(TESSERA, X_OK) != 0) {
    fprintf(stderr, "%s is not built\n", TESSERA);
    return 1;
  }
  test_broken_traces();
  test_usage_errors();
  test_csv();
  test_outputs();
  test_gen();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("lab.driver_cli: all checks passed\n");
  return 0;
}
