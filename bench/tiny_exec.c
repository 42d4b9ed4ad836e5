/* tiny_exec.c — the fixed cost of a short-lived program under each
 * allocator: peak RSS, wall and CPU time and minor faults of one exec, side
 * by side (by hand, like ab_preload.py; not a `tessera bench` row).
 *
 *   build/bench/bench_tiny_exec RUNS LIB0,LIB1,... PROGRAM [ARGS...]
 *
 * Runs PROGRAM RUNS times under LD_PRELOAD=LIB of each library in turn (the
 * order rotated every round; "-" is no preload, glibc), output to
 * /dev/null, and prints per library the medians of the child's ru_maxrss,
 * the fork-to-reap wall time, its user + system time and its minor faults.
 * build/bench/bench_tiny_child (this file built dynamic with TINY_CHILD)
 * does malloc(16) and free, the smallest program that allocates. Built
 * static where the C library allows it: the child's ru_maxrss
 * counts the pages it shared with this process after fork, so a
 * dynamically linked runner (about 1 MB resident, like /usr/bin/time) sets
 * a floor under the smallest programs. List LIB0 twice as an A/A control. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef TINY_CHILD
int main(void) {
  void *volatile p = malloc(16);
  free(p);
  return p == NULL;
}
#else
#define MAX_LIBS 16

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double ms(struct timeval tv) { return tv.tv_sec * 1e3 + tv.tv_usec / 1e3; }

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s RUNS LIB0,LIB1,... PROGRAM [ARGS...]\n", argv[0]);
    return 2;
  }
  int runs = atoi(argv[1]);
  if (runs < 1) runs = 1;
  char *libs[MAX_LIBS];
  int count = 0;
  for (char *lib = strtok(argv[2], ","); lib != NULL && count < MAX_LIBS; lib = strtok(NULL, ",")) libs[count++] = lib;
  char **command = argv + 3;
  double *v = calloc((size_t)(4 * runs * count), sizeof *v); /* [metric][lib][run] */
  if (v == NULL) return 1;
#define AT(metric, lib, run) v[((metric) * count + (lib)) * runs + (run)]
  for (int r = 0; r < runs; r++) {
    for (int k = 0; k < count; k++) {
      int j = (k + r) % count;
      struct timespec t0, t1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      pid_t pid = fork();
      if (pid < 0) return 1;
      if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        if (strcmp(libs[j], "-") == 0) unsetenv("LD_PRELOAD");
        else setenv("LD_PRELOAD", libs[j], 1);
        execvp(command[0], command);
        _exit(127);
      }
      int status;
      struct rusage ru;
      if (wait4(pid, &status, 0, &ru) != pid) return 1;
      clock_gettime(CLOCK_MONOTONIC, &t1);
      if (!WIFEXITED(status) || WEXITSTATUS(status) == 127) {
        fprintf(stderr, "%s failed under %s\n", command[0], libs[j]);
        return 1;
      }
      AT(0, j, r) = (double)ru.ru_maxrss;
      AT(1, j, r) = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
      AT(2, j, r) = ms(ru.ru_utime) + ms(ru.ru_stime);
      AT(3, j, r) = (double)ru.ru_minflt;
    }
  }
  for (int j = 0; j < count; j++)
    printf("%-48s maxrss %6.0f KiB  wall %7.3f ms  cpu %6.3f ms  minflt %5.0f\n", libs[j],
           median(&AT(0, j, 0), runs), median(&AT(1, j, 0), runs), median(&AT(2, j, 0), runs),
           median(&AT(3, j, 0), runs));
  free(v);
  return 0;
}
#endif
