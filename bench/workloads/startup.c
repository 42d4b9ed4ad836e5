/* Workload `startup`: the fixed cost of short-lived programs, the shape of a
 * shell script or a build: a malloc(16) program (bench_tiny_child, beside
 * this one), /bin/true, sort on a small file and ls, each exec'd in turn,
 * one at a time, 120 rounds at scale 1. Every child inherits the preloaded
 * allocator, so the row's time is what the allocator adds to exec, dynamic
 * loading, its own initialisation and exit; its peak RSS (the runner's
 * wait4 counts reaped descendants) is the largest child's.
 *
 * Results are checked: each child must exit 0 (the tiny child exits 1 when
 * malloc returned NULL), and sort's output must be the same bytes every
 * round (its checksum is compared with the first round's). */
#define _GNU_SOURCE
#include "wl_common.h"
#include "wl_exec.h"

#include <fcntl.h>
#include <libgen.h>
#include <sys/wait.h>
#include <unistd.h>

#define SORT_INPUT_LINES 400

/* Runs argv[0] with argv, stdin from `in_fd` and stdout to `out_fd` (each
 * /dev/null when -1), stderr kept; returns the exit status, or -1 when the
 * child did not exit normally. */
static int run_child(char *const argv[], int in_fd, int out_fd) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) wl_fail("fork");
  if (pid == 0) {
    int in = in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY);
    int out = out_fd >= 0 ? out_fd : open("/dev/null", O_WRONLY);
    if (in < 0 || out < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0) _exit(126);
    execv(argv[0], argv);
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) wl_fail("waitpid");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void must_succeed(char *const argv[], int in_fd, int out_fd) {
  int status = run_child(argv, in_fd, out_fd);
  if (status != 0) {
    fprintf(stderr, "startup: %s exited with status %d\n", argv[0], status);
    exit(3);
  }
}

/* FNV-1a of a file's bytes: sort's output, compared round to round. */
static uint64_t file_checksum(int fd) {
  uint64_t h = 1469598103934665603ull;
  unsigned char buf[4096];
  ssize_t n;
  if (lseek(fd, 0, SEEK_SET) < 0) wl_fail("lseek");
  while ((n = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < n; i++) h = (h ^ buf[i]) * 1099511628211ull;
  if (n < 0) wl_fail("read");
  return h;
}

static int temporary_file(void) {
  char name[] = "/tmp/tessera-startup-XXXXXX";
  int fd = mkstemp(name);
  if (fd < 0) wl_fail("mkstemp");
  unlink(name); /* the descriptor keeps it */
  return fd;
}

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "startup: short-lived programs (malloc(16), true, sort, ls) exec'd in turn");
  long rounds = wl_scaled(&o, 120, 2);

  char self[PATH_MAX], tiny[PATH_MAX + 32], truth[PATH_MAX], sort[PATH_MAX], ls[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) wl_fail("readlink /proc/self/exe");
  self[len] = '\0';
  snprintf(tiny, sizeof tiny, "%s/bench_tiny_child", dirname(self));
  if (access(tiny, X_OK) != 0) {
    fprintf(stderr, "startup: %s is missing (build the bench_tiny_child target)\n", tiny);
    return 3;
  }
  if (!wl_find_program("true", truth) || !wl_find_program("sort", sort) || !wl_find_program("ls", ls))
    wl_unavailable("coreutils (true, sort, ls)", "apt-get install coreutils");

  /* sort's input (lines in a scrambled order) and output: temporary files
   * unlinked at once, so nothing is left behind when the runner stops us. */
  int in_fd = temporary_file(), out_fd = temporary_file();
  char line[64];
  for (unsigned i = 0; i < SORT_INPUT_LINES; i++) {
    int n = snprintf(line, sizeof line, "line %u %u\n", (i * 7919u) % 1009u, i);
    if (write(in_fd, line, (size_t)n) != n) wl_fail("write sort input");
  }

  char *tiny_argv[] = {tiny, NULL};
  char *true_argv[] = {truth, NULL};
  char *sort_argv[] = {sort, NULL};
  char *ls_argv[] = {ls, "-l", "/usr/bin", NULL};
  uint64_t sorted = 0;
  double t0 = wl_now();
  for (long r = 0; r < rounds; r++) {
    must_succeed(tiny_argv, -1, -1);
    must_succeed(true_argv, -1, -1);
    if (lseek(in_fd, 0, SEEK_SET) != 0 || ftruncate(out_fd, 0) != 0 || lseek(out_fd, 0, SEEK_SET) != 0)
      wl_fail("rewind sort's files");
    must_succeed(sort_argv, in_fd, out_fd);
    uint64_t sum = file_checksum(out_fd);
    if (r == 0) sorted = sum;
    else if (sum != sorted) {
      fprintf(stderr, "startup: sort's output changed in round %ld\n", r);
      return 3;
    }
    must_succeed(ls_argv, -1, -1);
  }
  double work = wl_now() - t0;
  wl_report(work, (double)rounds * 4);
  return 0;
}
