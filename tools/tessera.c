/* tessera: the project's single command line. This file only dispatches to
 * the subcommands declared in commands.h; each one parses its own options and
 * prints its own --help. */
#include "commands.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct command_s {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} command_t;

static const command_t commands[] = {
  /* Keep one line per subcommand. */
  {"lab", cmd_lab, "replay malloc-lab traces on the lab heap policies (--compare, gen)"},
  {"run", cmd_run, "run a program on libtessera (LD_PRELOAD; --stats, --heap-report)"},
  {"bench", cmd_bench, "compare allocators on the benchmark workloads (--quick, --list)"},
};

static char self_dir[PATH_MAX];

const char *tessera_self_dir(void) {
  if (self_dir[0] == '\0') {
    ssize_t n = readlink("/proc/self/exe", self_dir, sizeof self_dir - 1);
    if (n <= 0) {
      strcpy(self_dir, ".");
    } else {
      self_dir[n] = '\0';
      char *slash = strrchr(self_dir, '/');
      if (slash == self_dir) slash[1] = '\0';
      else if (slash) *slash = '\0';
    }
  }
  return self_dir;
}

/* Output lost on a full disk or a closed pipe is an error, not a silent
 * success: `tessera bench --list > list.txt` exited 0 with list.txt cut
 * short, as did the table of `bench --from` and every --help. (`lab`
 * checks its own results and reports them as such, exit 2.) */
int tessera_stdout_status(int status) {
  errno = 0;
  int flushed = fflush(stdout) == 0;
  int err = errno;
  if (status != 0 || (flushed && !ferror(stdout))) return status;
  fprintf(stderr, "tessera: cannot write to standard output%s%s\n", err ? ": " : "", err ? strerror(err) : "");
  return 2;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: tessera COMMAND [OPTIONS] [ARGS...]\n"
          "\n"
          "Tessera: a fast, lean malloc (libtessera), the textbook allocator lab,\n"
          "and the tools to measure them.\n"
          "\n"
          "Commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\nRun 'tessera COMMAND --help' for the options of a command.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return tessera_stdout_status(0);
  }
  if (!strcmp(argv[1], "--version")) {
    printf("tessera %s\n", TESSERA_VERSION);
    return tessera_stdout_status(0);
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name))
      return tessera_stdout_status(commands[i].run(argc - 1, argv + 1));
  fprintf(stderr, "tessera: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
