/* death_runner.c — runs a one-bug program in a child process and asserts how
 * it dies: the signal (or exit status) and the exact error text on stderr.
 *
 *   death_runner [--env NAME=VALUE]... (--signal NUM | --exit NUM)
 *                [--stderr TEXT]... [--stderr-lines N] [--no-stderr TEXT]...
 *                [--stdout TEXT]... -- PROGRAM [ARGS...]
 *
 * --stderr TEXT: TEXT must appear on a line of the child's stderr.
 * --stderr-lines N: stderr must have exactly N lines (the allocator reports
 * an error in one line, not a dump). --no-stderr TEXT: TEXT must not appear.
 * --stdout TEXT: TEXT must appear in stdout (a program that was told to
 * continue after an error proves it did by printing).
 * The child runs with core dumps off so an expected abort stays fast.
 * Exit status: 0 all expectations met, 1 otherwise, 2 usage error. Used by
 * tests/security/CMakeLists.txt for every security.* test. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_EXPECT 16

static char *slurp(FILE *f) {
  fflush(f);
  long len = ftell(f);
  if (len < 0) len = 0;
  char *buf = calloc((size_t)len + 1, 1);
  if (buf == NULL) {
    perror("death_runner: calloc");
    exit(1);
  }
  rewind(f);
  size_t got = fread(buf, 1, (size_t)len, f);
  buf[got] = '\0';
  return buf;
}

static int lines_containing(const char *text, const char *needle) {
  int count = 0;
  const char *line = text;
  while (*line) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char *copy = strndup(line, len);
    if (copy && strstr(copy, needle)) count++;
    free(copy);
    if (!end) break;
    line = end + 1;
  }
  return count;
}

static void usage(void) {
  fprintf(stderr,
          "usage: death_runner [--env N=V]... (--signal NUM | --exit NUM) [--stderr TEXT]...\n"
          "                    [--stderr-lines N] [--no-stderr TEXT]... [--stdout TEXT]...\n"
          "                    -- PROGRAM [ARGS...]\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *want_stderr[MAX_EXPECT], *not_stderr[MAX_EXPECT], *want_stdout[MAX_EXPECT];
  int n_want_stderr = 0, n_not_stderr = 0, n_want_stdout = 0;
  int want_signal = -1, want_exit = -1, want_lines = -1;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (i + 1 >= argc) usage();
    const char *v = argv[++i];
    if (strcmp(a, "--env") == 0) {
      if (putenv((char *)v) != 0) usage();
    } else if (strcmp(a, "--signal") == 0) {
      want_signal = atoi(v);
    } else if (strcmp(a, "--stderr-lines") == 0) {
      want_lines = atoi(v);
    } else if (strcmp(a, "--exit") == 0) {
      want_exit = atoi(v);
    } else if (strcmp(a, "--stderr") == 0 && n_want_stderr < MAX_EXPECT) {
      want_stderr[n_want_stderr++] = v;
    } else if (strcmp(a, "--no-stderr") == 0 && n_not_stderr < MAX_EXPECT) {
      not_stderr[n_not_stderr++] = v;
    } else if (strcmp(a, "--stdout") == 0 && n_want_stdout < MAX_EXPECT) {
      want_stdout[n_want_stdout++] = v;
    } else {
      usage();
    }
  }
  if (i >= argc || (want_signal < 0) == (want_exit < 0)) usage();

  FILE *out = tmpfile(), *err = tmpfile();
  if (!out || !err) {
    perror("death_runner: tmpfile");
    return 1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("death_runner: fork");
    return 1;
  }
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    dup2(fileno(out), STDOUT_FILENO);
    dup2(fileno(err), STDERR_FILENO);
    execv(argv[i], argv + i);
    fprintf(stderr, "death_runner: cannot run %s\n", argv[i]);
    _exit(127);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid) {
    perror("death_runner: waitpid");
    return 1;
  }
  char *out_text = slurp(out), *err_text = slurp(err);
  printf("---- child stdout ----\n%s---- child stderr ----\n%s----\n", out_text, err_text);

  bool ok = true;
  if (want_signal >= 0) {
    if (!WIFSIGNALED(status) || WTERMSIG(status) != want_signal) {
      printf("FAIL: expected death by signal %d (%s), got %s %d\n", want_signal,
             strsignal(want_signal), WIFSIGNALED(status) ? "signal" : "exit status",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      ok = false;
    }
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != want_exit) {
    printf("FAIL: expected exit status %d, got %s %d\n", want_exit,
           WIFSIGNALED(status) ? "signal" : "exit status",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    ok = false;
  }
  for (int k = 0; k < n_want_stderr; k++) {
    if (lines_containing(err_text, want_stderr[k]) == 0) {
      printf("FAIL: no line of stderr contains \"%s\"\n", want_stderr[k]);
      ok = false;
    }
  }
  if (want_lines >= 0) {
    int lines = 0;
    for (const char *c = err_text; *c; c++) lines += *c == '\n';
    if (err_text[0] && err_text[strlen(err_text) - 1] != '\n') lines++;
    if (lines != want_lines) {
      printf("FAIL: stderr has %d lines, expected %d\n", lines, want_lines);
      ok = false;
    }
  }
  for (int k = 0; k < n_not_stderr; k++) {
    if (strstr(err_text, not_stderr[k])) {
      printf("FAIL: stderr contains \"%s\"\n", not_stderr[k]);
      ok = false;
    }
  }
  for (int k = 0; k < n_want_stdout; k++) {
    if (!strstr(out_text, want_stdout[k])) {
      printf("FAIL: stdout lacks \"%s\"\n", want_stdout[k]);
      ok = false;
    }
  }
  printf("%s\n", ok ? "PASS" : "FAILED");
  free(out_text);
  free(err_text);
  return ok ? 0 : 1;
}
