/* Machine description (see bench_machine.h). Everything is read from /proc,
 * uname and sysconf; package versions come from dpkg-query when it exists
 * (its absence is written down, not an error). */
#define _GNU_SOURCE /* pipe2 */
#include "bench_machine.h"

#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int bench_cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static void cpu_model(char *buf, size_t len) {
  snprintf(buf, len, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "model name", 10)) {
      char *colon = strchr(line, ':');
      if (colon) {
        colon++;
        while (*colon == ' ') colon++;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, len, "%s", colon);
      }
      break;
    }
  fclose(f);
}

static double mem_gib(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (double)pages * (double)size / (1024.0 * 1024.0 * 1024.0) : 0;
}

void bench_machine_summary(char *buf, size_t len) {
  char cpu[256];
  struct utsname u;
  cpu_model(cpu, sizeof cpu);
  if (uname(&u) != 0) snprintf(u.release, sizeof u.release, "?");
  snprintf(buf, len, "%s, %d cores, %.1f GiB, Linux %s, glibc %s", cpu, bench_cpu_count(), mem_gib(),
           u.release, gnu_get_libc_version());
}

/* Copies a command's output into out (best effort). */
static void copy_command(FILE *out, const char *command) {
  FILE *p = popen(command, "r");
  if (!p) return;
  char line[512];
  while (fgets(line, sizeof line, p)) fputs(line, out);
  pclose(p);
}

/* Copies the output of argv (no shell: the source path may hold any
 * character) into out; "unknown" when it fails or prints nothing. */
static void copy_program_output(FILE *out, char *const argv[]) {
  int fds[2];
  size_t copied = 0;
  if (pipe2(fds, O_CLOEXEC) == 0) {
    posix_spawn_file_actions_t fa;
    pid_t pid = -1;
    extern char **environ;
    if (posix_spawn_file_actions_init(&fa) == 0) {
      if (posix_spawn_file_actions_adddup2(&fa, fds[1], 1) == 0 &&
          posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0) == 0 &&
          posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0)
        pid = -1;
      posix_spawn_file_actions_destroy(&fa);
    }
    close(fds[1]);
    char buf[512];
    ssize_t n;
    while (pid > 0 && (n = read(fds[0], buf, sizeof buf)) > 0) copied += fwrite(buf, 1, (size_t)n, out);
    close(fds[0]);
    int st;
    if (pid > 0)
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  }
  if (!copied) fputs("unknown\n", out);
}

int bench_machine_write(const char *path, const bench_allocator_t *allocs, size_t n_allocs,
                        const char *command) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  char summary[512], cpu[256];
  struct utsname u;
  memset(&u, 0, sizeof u);
  uname(&u);
  cpu_model(cpu, sizeof cpu);
  bench_machine_summary(summary, sizeof summary);
  time_t now = time(NULL);
  char date[64];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  fprintf(f, "date: %s\ncommand: %s\n", date, command);
  fprintf(f, "cpu: %s\ncores: %d\nmemory_gib: %.1f\n", cpu, bench_cpu_count(), mem_gib());
  fprintf(f, "kernel: %s %s %s\nglibc: %s\n", u.sysname, u.release, u.machine, gnu_get_libc_version());
  fprintf(f, "summary: %s\n", summary);
  fprintf(f, "\n[allocators]\n");
  for (size_t i = 0; i < n_allocs; i++)
    fprintf(f, "%s: %s\n", allocs[i].name, allocs[i].path[0] ? allocs[i].path : "(system malloc, no preload)");
  fprintf(f, "\n[source]\n");
  fflush(f);
  char *git[] = {"git", "-C", (char *)bench_source_dir(), "describe", "--always", "--dirty", NULL};
  fputs("commit: ", f);
  copy_program_output(f, git);
  fflush(f);
  fprintf(f, "\n[packages] (dpkg-query)\n");
  fflush(f);
  if (system("command -v dpkg-query >/dev/null 2>&1") == 0)
    copy_command(f, "dpkg-query -W -f='${Package} ${Version}\\n' libc6 libjemalloc2 libtcmalloc-minimal4 "
                    "libmimalloc2.0 redis-server redis-tools sqlite3 python3 gcc 2>/dev/null");
  else
    fprintf(f, "dpkg-query not available\n");
  return fclose(f) == 0 ? 0 : -1;
}
