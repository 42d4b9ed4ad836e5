/* api_options.c — libtessera's options: environment parsing and the API.
 *
 * Options are read from TESSERA_<NAME> at start-up, so each environment case
 * runs this program again as a child (/proc/self/exe --child) with exactly
 * one variable set and the parent's TESSERA_* removed, capturing its stdout
 * (the option values it sees) and stderr (warnings). A valid value is taken
 * silently; an invalid or out-of-range one produces exactly one stderr line,
 * which names the variable, and the default stays. TESSERA_SHOW_STATS=1
 * prints statistics at exit; TESSERA_HEAP_REPORT=1 prints the heap report.
 * In-process: tes_option_set/get/name semantics.
 *
 * Linked with libtessera. */
#define _GNU_SOURCE
#include "tessera.h"

#include "api_check.h"

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/wait.h>

extern char **environ;

typedef struct child_output_s {
  char out[8192], err[16384];
  int status;
} child_output_t;

/* Child mode: print every option as name=value, do a little work. The
 * reference to tes_heap_report links src/heap_report.c (and with it the
 * TESSERA_HEAP_REPORT exit hook) into this statically linked test, as any
 * static program that wants the hook must. */
static void (*volatile heap_report_link)(FILE *) = tes_heap_report;

static int child_main(void) {
  (void)heap_report_link;
  for (int i = 0; i < 1000; i++) free(malloc(16 + (size_t)i));
  for (int o = 0; o < TES_OPTION_COUNT; o++) printf("%s=%ld\n", tes_option_name(o), tes_option_get(o));
  return 0;
}

static void read_all(int fd, char *buf, size_t cap) {
  size_t len = 0;
  ssize_t n;
  while ((n = read(fd, buf + len, cap - 1 - len)) > 0) {
    len += (size_t)n;
    if (len == cap - 1) break;
  }
  buf[len] = '\0';
}

/* The child's mode: --child, or --child-closes-stderr (as coreutils'
 * close_stdout does before the exit hooks run). */
static const char *child_mode = "--child";

/* Run ourselves with the clean environment plus `assignment` (NULL: none). */
static void run_child(const char *assignment, child_output_t *result) {
  char *env[256];
  int n = 0;
  for (char **e = environ; *e && n < 250; e++)
    if (strncmp(*e, "TESSERA_", 8) != 0) env[n++] = *e;
  if (assignment) env[n++] = (char *)assignment;
  env[n] = NULL;
  int out_pipe[2], err_pipe[2];
  REQUIRE(pipe(out_pipe) == 0 && pipe(err_pipe) == 0, "pipe");
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    char *argv[] = {"api_options", (char *)child_mode, NULL};
    execve("/proc/self/exe", argv, env);
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  /* Outputs are small; read stderr after stdout (both fit pipe buffers). */
  read_all(out_pipe[0], result->out, sizeof result->out);
  read_all(err_pipe[0], result->err, sizeof result->err);
  close(out_pipe[0]);
  close(err_pipe[0]);
  waitpid(pid, &result->status, 0);
}

static long value_in(const child_output_t *r, const char *name) {
  char key[128];
  snprintf(key, sizeof key, "%s=", name);
  for (const char *line = r->out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
    if (!strncmp(line, key, strlen(key))) return strtol(line + strlen(key), NULL, 10);
  return LONG_MIN;
}

static int count_lines(const char *text) {
  int lines = 0;
  for (; *text; text++) lines += *text == '\n';
  return lines;
}

static void env_name(tes_option_t option, char *out, size_t size) {
  snprintf(out, size, "TESSERA_%s", tes_option_name(option));
  for (char *c = out; *c; c++) *c = (char)toupper((unsigned char)*c);
}

typedef struct env_case_s {
  tes_option_t option;
  const char *value;
  bool valid;
} env_case_t;

static void check_environment(void) {
  API_GROUP("environment parsing");
  static child_output_t base, r;
  run_child(NULL, &base);
  REQUIRE(WIFEXITED(base.status) && WEXITSTATUS(base.status) == 0, "child with clean environment failed: %s",
          base.err);
  CHECK(base.err[0] == '\0', "clean environment printed to stderr: \"%s\"", base.err);

  const env_case_t cases[] = {
      {TES_OPTION_PURGE_DELAY_MS, "250", true},  {TES_OPTION_PURGE_DELAY_MS, "0", true},
      {TES_OPTION_SEGMENT_CACHE, "2", true},     {TES_OPTION_HUGE_PAGES, "1", true},
      {TES_OPTION_PURGE_DECOMMIT, "0", true},    {TES_OPTION_ABORT_ON_ERROR, "0", true},
      {TES_OPTION_PURGE_DELAY_MS, "abc", false}, {TES_OPTION_PURGE_DELAY_MS, "12abc", false},
      {TES_OPTION_PURGE_DELAY_MS, "-1", false},  {TES_OPTION_PURGE_DELAY_MS, "99999999999999999999999", false},
      {TES_OPTION_SHOW_STATS, "2", false},       {TES_OPTION_SHOW_STATS, "yes", false},
      {TES_OPTION_VERBOSE, "7", false},          {TES_OPTION_HUGE_PAGES, "3", false},
      {TES_OPTION_PURGE_DECOMMIT, "-4", false},  {TES_OPTION_SEGMENT_CACHE, "-1", false},
      {TES_OPTION_ABORT_ON_ERROR, "2", false},   {TES_OPTION_BINS, "0", true},
      {TES_OPTION_BINS, "2", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char variable[96], assignment[192];
    env_name(cases[i].option, variable, sizeof variable);
    snprintf(assignment, sizeof assignment, "%s=%s", variable, cases[i].value);
    memset(&r, 0, sizeof r);
    run_child(assignment, &r);
    const char *name = tes_option_name(cases[i].option);
    long seen = value_in(&r, name), def = value_in(&base, name);
    CHECK(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s: child failed (status %d)", assignment, r.status);
    if (cases[i].valid) {
      CHECK(seen == strtol(cases[i].value, NULL, 10), "%s: option reads %ld", assignment, seen);
      CHECK(strstr(r.err, variable) == NULL, "%s (valid) produced a warning: \"%s\"", assignment, r.err);
    } else {
      CHECK(seen == def, "%s: option reads %ld, want the default %ld", assignment, seen, def);
      CHECK(count_lines(r.err) == 1, "%s: %d stderr lines, want exactly one warning: \"%s\"", assignment,
            count_lines(r.err), r.err);
      CHECK(strstr(r.err, variable) != NULL, "%s: warning does not name %s: \"%s\"", assignment, variable, r.err);
    }
  }

  /* TESSERA_SHOW_STATS=1 prints the statistics at exit; 0 prints nothing. */
  memset(&r, 0, sizeof r);
  run_child("TESSERA_SHOW_STATS=1", &r);
  CHECK(strlen(r.err) > 200, "TESSERA_SHOW_STATS=1 printed %zu bytes to stderr", strlen(r.err));
  CHECK(strcasestr(r.err, "malloc") != NULL, "TESSERA_SHOW_STATS=1 output does not mention malloc: \"%.300s\"",
        r.err);
  memset(&r, 0, sizeof r);
  run_child("TESSERA_SHOW_STATS=0", &r);
  CHECK(r.err[0] == '\0', "TESSERA_SHOW_STATS=0 printed \"%.200s\"", r.err);

  /* A program that closes stderr before exit (every coreutils one) still
   * gets its statistics and heap report, on the stderr it started with:
   * they were lost (write to fd 2: EBADF) before the twenty-sixth session. */
  child_mode = "--child-closes-stderr";
  memset(&r, 0, sizeof r);
  run_child("TESSERA_SHOW_STATS=1", &r);
  CHECK(strcasestr(r.err, "malloc") != NULL, "TESSERA_SHOW_STATS=1, stderr closed by the program: printed \"%.200s\"",
        r.err);
  memset(&r, 0, sizeof r);
  run_child("TESSERA_HEAP_REPORT=1", &r);
  CHECK(strstr(r.err, "tessera heap report:") != NULL,
        "TESSERA_HEAP_REPORT=1, stderr closed by the program: printed \"%.200s\"", r.err);
  memset(&r, 0, sizeof r);
  run_child("TESSERA_SHOW_STATS=0", &r);
  CHECK(r.err[0] == '\0', "TESSERA_SHOW_STATS=0, stderr closed by the program: printed \"%.200s\"", r.err);
  /* A program that closes every descriptor from 3 up (closefrom, as
   * daemons do) and opens a file that takes the number of the library's
   * copy of stderr, then closes stderr: the exit report is not written
   * into that file (review, twenty-sixth session, mrg26). */
  char kept_path[64];
  snprintf(kept_path, sizeof kept_path, "/tmp/api_options_kept_%d", (int)getpid());
  child_mode = "--child-reuses-kept";
  memset(&r, 0, sizeof r);
  run_child("TESSERA_SHOW_STATS=1", &r);
  char file_text[256] = "";
  int kept_file = open(kept_path, O_RDONLY);
  CHECK(kept_file >= 0, "the child's file %s was not made", kept_path);
  if (kept_file >= 0) {
    read_all(kept_file, file_text, sizeof file_text);
    close(kept_file);
  }
  unlink(kept_path);
  CHECK(!strcmp(file_text, "the program's own data\n"),
        "TESSERA_SHOW_STATS=1, the stderr copy's number reused for a file: the file holds \"%.200s\"", file_text);
  child_mode = "--child";

  /* TESSERA_HEAP_REPORT (src/heap_report.c): 1 prints, junk warns once. */
  memset(&r, 0, sizeof r);
  run_child("TESSERA_HEAP_REPORT=1", &r);
  CHECK(strstr(r.err, "tessera heap report:") != NULL, "TESSERA_HEAP_REPORT=1 printed \"%.200s\"", r.err);
  memset(&r, 0, sizeof r);
  run_child("TESSERA_HEAP_REPORT= 1 ", &r); /* blanks around it, as for the other options */
  CHECK(strstr(r.err, "tessera heap report:") != NULL, "TESSERA_HEAP_REPORT=' 1 ' printed \"%.200s\"", r.err);
  memset(&r, 0, sizeof r);
  run_child("TESSERA_HEAP_REPORT=+1", &r); /* the options' syntax: a sign, leading zeros */
  CHECK(strstr(r.err, "tessera heap report:") != NULL, "TESSERA_HEAP_REPORT=+1 printed \"%.200s\"", r.err);
  memset(&r, 0, sizeof r);
  run_child("TESSERA_HEAP_REPORT=0", &r);
  CHECK(r.err[0] == '\0', "TESSERA_HEAP_REPORT=0 printed \"%.200s\"", r.err);
  memset(&r, 0, sizeof r);
  run_child("TESSERA_HEAP_REPORT=", &r); /* empty: warned about, as an empty option is */
  CHECK(count_lines(r.err) == 1 && strstr(r.err, "ignoring TESSERA_HEAP_REPORT") && !strstr(r.err, "heap report:"),
        "TESSERA_HEAP_REPORT= (empty) printed \"%.200s\"", r.err);
  memset(&r, 0, sizeof r);
  run_child("TESSERA_HEAP_REPORT=maybe", &r);
  CHECK(count_lines(r.err) == 1 && strstr(r.err, "TESSERA_HEAP_REPORT"), "TESSERA_HEAP_REPORT=maybe: \"%.200s\"",
        r.err);
}

static void check_api(void) {
  API_GROUP("tes_option_set/get/name");
  for (int o = 0; o < TES_OPTION_COUNT; o++) {
    const char *name = tes_option_name(o);
    CHECK(name != NULL && name[0] != '\0', "option %d has no name", o);
    if (!name) continue;
    bool lower = true;
    for (const char *c = name; *c; c++) lower &= islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '_';
    CHECK(lower, "option %d name \"%s\" is not lower_case", o, name);
    for (int p = 0; p < o; p++)
      CHECK(tes_option_name(p) == NULL || strcmp(tes_option_name(p), name) != 0, "options %d and %d share \"%s\"",
            p, o, name);
  }
  CHECK(strcmp(tes_option_name(TES_OPTION_PURGE_DELAY_MS), "purge_delay_ms") == 0,
        "purge delay option is named \"%s\", the documented variable is TESSERA_PURGE_DELAY_MS",
        tes_option_name(TES_OPTION_PURGE_DELAY_MS));
  CHECK(strcmp(tes_option_name(TES_OPTION_SHOW_STATS), "show_stats") == 0, "show_stats option is named \"%s\"",
        tes_option_name(TES_OPTION_SHOW_STATS));

  long before = tes_option_get(TES_OPTION_PURGE_DELAY_MS);
  CHECK(tes_option_set(TES_OPTION_PURGE_DELAY_MS, 123) == 0, "set purge_delay_ms 123 refused");
  CHECK(tes_option_get(TES_OPTION_PURGE_DELAY_MS) == 123, "purge_delay_ms reads %ld after set 123",
        tes_option_get(TES_OPTION_PURGE_DELAY_MS));
  CHECK(tes_option_set(TES_OPTION_PURGE_DELAY_MS, -5) == EINVAL, "set purge_delay_ms -5 accepted");
  CHECK(tes_option_get(TES_OPTION_PURGE_DELAY_MS) == 123, "rejected set changed the value to %ld",
        tes_option_get(TES_OPTION_PURGE_DELAY_MS));
  tes_option_set(TES_OPTION_PURGE_DELAY_MS, before);
  CHECK(tes_option_set(TES_OPTION_SHOW_STATS, 2) == EINVAL, "show_stats accepted 2");
  /* secure is read-only: it tells which build this is (the default one). */
  CHECK(tes_option_get(TES_OPTION_SECURE) == 0, "the default build reads secure = %ld",
        tes_option_get(TES_OPTION_SECURE));
  CHECK(tes_option_set(TES_OPTION_SECURE, 1) == EINVAL && tes_option_get(TES_OPTION_SECURE) == 0,
        "the default build accepted secure = 1");
  CHECK(tes_option_set(TES_OPTION_COUNT, 0) == EINVAL, "option index TES_OPTION_COUNT accepted");
  CHECK(tes_option_set((tes_option_t)-1, 0) == EINVAL, "option index -1 accepted");
  CHECK(tes_option_set(TES_OPTION_VERBOSE, 1) == 0 && tes_option_get(TES_OPTION_VERBOSE) == 1, "verbose 1 refused");
  tes_option_set(TES_OPTION_VERBOSE, 0);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--child")) return child_main();
  if (argc > 1 && !strcmp(argv[1], "--child-closes-stderr")) {
    int status = child_main();
    fflush(stdout);
    close(2); /* what fclose(stderr) does to the descriptor, without a closed FILE for the library to touch */
    return status;
  }
  if (argc > 1 && !strcmp(argv[1], "--child-reuses-kept")) {
    int status = child_main();
    fflush(stdout);
    for (int fd = 3; fd < 1024; fd++) close(fd);
    char path[64];
    snprintf(path, sizeof path, "/tmp/api_options_kept_%d", (int)getppid());
    int file = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (file < 0) return 1;
    /* Every number from 3 to 63 names the file, whichever the library's copy had. */
    for (int fd = 3; fd < 64; fd++)
      if (fd != file) dup2(file, fd);
    static const char data[] = "the program's own data\n";
    if (write(file, data, sizeof data - 1) != (ssize_t)(sizeof data - 1)) return 1;
    close(2); /* as close_stdout does at exit */
    return status;
  }
  REQUIRE(api_malloc_is_linked_tessera(), "api_options must be linked with libtessera");
  api_warm_up_threads();
  check_api();
  check_environment();
  return api_finish("api_options");
}
