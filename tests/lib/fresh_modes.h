/* fresh_modes.h — run a test program once per mode, each in a fresh
 * process: the program re-executes itself as `argv[0] MODE` and the mode's
 * exit status is checked. For tests whose modes must not inherit one
 * another's heap, RSS baseline, pthread keys or fork handlers. Returns the
 * number of modes that failed, after printing one line per mode. */
#ifndef TESSERA_TESTS_FRESH_MODES_H
#define TESSERA_TESTS_FRESH_MODES_H

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_modes_in_fresh_processes(const char *test, char **argv, const char *const *modes, size_t count) {
  int failed = 0;
  for (size_t i = 0; i < count; i++) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return (int)count;
    }
    if (pid == 0) {
      char *child_argv[] = {argv[0], (char *)modes[i], NULL};
      execv("/proc/self/exe", child_argv);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("%s %s %s (status %#x)\n", ok ? "ok  " : "FAIL", test, modes[i], (unsigned)status);
    failed += !ok;
  }
  return failed;
}

#endif
