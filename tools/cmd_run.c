/* cmd_run.c — `tessera run`: run any program on libtessera.
 *
 *   tessera run [--stats] [--heap-report] [--secure] [--lib PATH] [--] PROGRAM [ARGS...]
 *
 * Puts libtessera.so (found next to the tessera binary, or --lib PATH) in
 * front of LD_PRELOAD, sets the libtessera environment options the flags ask
 * for, forks, execs PROGRAM (searched in PATH) and waits. The exit status is
 * PROGRAM's, or 128+N when a signal N killed it (as a shell reports it);
 * 127/126 when PROGRAM cannot be found/executed, 2 for a usage error
 * (--secure with --lib included) or a library that is missing, not an ELF
 * shared object, or at a path with a space or a colon (tools/preload.c).
 *
 * `--help` lists libtessera's options. The list is not written here: it is
 * read at run time from the library itself by dlopen'ing it and calling
 * tes_option_name/tes_option_get for every option, and the accepted range
 * is found by probing tes_option_set (which returns EINVAL outside the
 * range), so the table in the library is the only place an option is
 * described. */
#include "commands.h"
#include "preload.h"

/* Only for the tes_option_t enumeration: the CLI never links libtessera,
 * it dlopens it. */
#include "../include/tessera.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef long option_get_fn(tes_option_t option);
typedef int option_set_fn(tes_option_t option, long value);
typedef const char *option_name_fn(tes_option_t option);

typedef struct run_args_s {
  bool stats, heap_report, secure, help;
  const char *lib;   /* explicit --lib PATH, or NULL */
  int program_index; /* argv index of PROGRAM, or -1 */
} run_args_t;

static void run_usage(FILE *out) {
  fprintf(out,
          "usage: tessera run [--stats] [--heap-report] [--secure] [--lib PATH] [--] PROGRAM [ARGS...]\n"
          "\n"
          "Runs PROGRAM on libtessera (LD_PRELOAD) and exits with its status\n"
          "(128+N if signal N killed it, 127 if it cannot be found).\n"
          "\n"
          "Options:\n"
          "  --stats        print libtessera's statistics to stderr at exit (sets TESSERA_SHOW_STATS=1)\n"
          "  --heap-report  print a per-size-class occupancy summary at exit (sets TESSERA_HEAP_REPORT=1)\n"
          "  --secure       preload the hardened build, libtessera-secure.so (not with --lib)\n"
          "  --lib PATH     preload PATH instead of the libtessera.so next to this binary\n"
          "  --help         show this text and libtessera's options\n");
}

/* Returns 0, or 2 after printing a usage error. */
static int parse_run_args(int argc, char **argv, run_args_t *args) {
  memset(args, 0, sizeof *args);
  args->program_index = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      if (i + 1 < argc) args->program_index = i + 1;
      return 0;
    }
    if (!strcmp(a, "--stats")) args->stats = true;
    else if (!strcmp(a, "--heap-report")) args->heap_report = true;
    else if (!strcmp(a, "--secure")) args->secure = true;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) args->help = true;
    else if (!strcmp(a, "--lib") || !strncmp(a, "--lib=", 6)) {
      if (a[5] == '\0' && i + 1 >= argc) {
        fprintf(stderr, "tessera run: --lib needs a PATH\n");
        return 2;
      }
      const char *lib = a[5] == '=' ? a + 6 : argv[++i];
      /* Given twice, the last one was preloaded, silently; '' was "cannot
       * read the library : No such file or directory". */
      if (args->lib) {
        fprintf(stderr, "tessera run: --lib is given twice ('%s' and '%s')\n", args->lib, lib);
        return 2;
      }
      if (!*lib) {
        fprintf(stderr, "tessera run: --lib needs a PATH, not ''\n");
        return 2;
      }
      args->lib = lib;
    } else if (a[0] == '-') {
      fprintf(stderr, "tessera run: unknown option '%s' (see tessera run --help)\n", a);
      return 2;
    } else {
      args->program_index = i;
      return 0;
    }
  }
  return 0;
}

/* The library to preload, as an absolute path in `out`; false (with a
 * message) when it does not exist, is no shared library, or has a path the
 * loader would split (see preload.h: PROGRAM would silently run on glibc). */
static bool resolve_library(const run_args_t *args, char *out, size_t size) {
  char wanted[PATH_MAX];
  if (args->lib)
    snprintf(wanted, sizeof wanted, "%s", args->lib);
  else
    snprintf(wanted, sizeof wanted, "%s/%s", tessera_self_dir(),
             args->secure ? "libtessera-secure.so" : "libtessera.so");
  char resolved[PATH_MAX];
  if (!preload_resolve(wanted, resolved, sizeof resolved)) {
    fprintf(stderr, "tessera run: cannot read the library %s: %s%s\n", wanted, strerror(errno),
            args->lib ? "" : " (build it first: make)");
    return false;
  }
  const char *why = preload_problem(resolved);
  if (why) {
    fprintf(stderr, "tessera run: %s%s%s%s cannot be preloaded: %s\n", wanted,
            strcmp(wanted, resolved) ? " (" : "", strcmp(wanted, resolved) ? resolved : "",
            strcmp(wanted, resolved) ? ")" : "", why);
    return false;
  }
  snprintf(out, size, "%s", resolved);
  return true;
}

/* ---- --help: the library's own option table ----------------------------- */

/* Largest (direction +1) or smallest (-1) value tes_option_set accepts,
 * starting from a value it accepts. Exponential then binary search;
 * *unbounded is set when the search reaches the end of `long`. */
static long probe_limit(option_set_fn *set, tes_option_t option, long valid, int direction, bool *unbounded) {
  long good = valid, step = 1;
  *unbounded = false;
  for (;;) {
    long candidate;
    if (direction > 0 ? valid > LONG_MAX - step : valid < LONG_MIN + step) {
      candidate = direction > 0 ? LONG_MAX : LONG_MIN;
      if (set(option, candidate) == 0) {
        *unbounded = true;
        return candidate;
      }
      break;
    }
    candidate = direction > 0 ? valid + step : valid - step;
    if (set(option, candidate) != 0) break;
    good = candidate;
    if (step > LONG_MAX / 2) {
      *unbounded = true;
      return good;
    }
    step *= 2;
  }
  /* good is accepted; good + direction*step' for the last step is not. */
  long bad = direction > 0 ? (valid > LONG_MAX - step ? LONG_MAX : valid + step)
                           : (valid < LONG_MIN + step ? LONG_MIN : valid - step);
  while ((direction > 0 ? bad - good : good - bad) > 1) {
    long mid = good + (bad - good) / 2;
    if (set(option, mid) == 0) good = mid;
    else bad = mid;
  }
  return good;
}

static void print_library_options(const char *library) {
  /* Read the defaults, not this shell's settings: hide TESSERA_* from the
   * library's start-up, remembering them to show what is set now.
   * Every one of them: a fixed array of 32 used to stop at the 32nd, and
   * those after it stayed set, so the library started with them and the
   * table showed this shell's value as the default, with "set now" empty.
   * Counted first, so no limit at all (environ does not change until the
   * unsetenv calls below). */
  extern char **environ;
  size_t saved_count = 0;
  for (char **e = environ; *e; e++)
    if (!strncmp(*e, "TESSERA_", 8)) saved_count++;
  char **saved = calloc(saved_count ? saved_count : 1, sizeof *saved);
  if (saved == NULL) {
    fprintf(stderr, "tessera run: out of memory\n");
    exit(1);
  }
  saved_count = 0;
  for (char **e = environ; *e; e++)
    if (!strncmp(*e, "TESSERA_", 8)) {
      saved[saved_count] = strdup(*e);
      if (saved[saved_count] == NULL) {
        fprintf(stderr, "tessera run: out of memory\n");
        exit(1);
      }
      saved_count++;
    }
  for (size_t i = 0; i < saved_count; i++) {
    size_t n = strcspn(saved[i], "=");
    char *name = strndup(saved[i], n); /* any length, not 127 bytes */
    if (name != NULL) unsetenv(name);
    free(name);
  }

  void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  option_name_fn *name_of = handle ? (option_name_fn *)dlsym(handle, "tes_option_name") : NULL;
  option_get_fn *get = handle ? (option_get_fn *)dlsym(handle, "tes_option_get") : NULL;
  option_set_fn *set = handle ? (option_set_fn *)dlsym(handle, "tes_option_set") : NULL;
  printf("\nlibtessera options (environment variables read at start-up; from %s):\n", library);
  if (!name_of || !get || !set) {
    printf("  (cannot read them: %s)\n", handle ? "the library lacks tes_option_name/get/set" : dlerror());
  } else {
    printf("  %-30s %10s  %-24s %s\n", "variable", "default", "accepted range", "set now");
    for (tes_option_t option = 0; option < TES_OPTION_COUNT; option++) {
      const char *name = name_of(option);
      if (name == NULL) name = "(unnamed)";
      char variable[128] = "TESSERA_";
      for (size_t i = 0; name[i] && i + 9 < sizeof variable; i++) {
        variable[8 + i] = (char)toupper((unsigned char)name[i]);
        variable[9 + i] = '\0';
      }
      long value = get(option);
      bool low_open, high_open;
      long low = probe_limit(set, option, value, -1, &low_open);
      long high = probe_limit(set, option, value, +1, &high_open);
      set(option, value); /* leave the probed copy as it was */
      char range[64];
      if (high_open)
        snprintf(range, sizeof range, "%ld..(no limit)", low);
      else
        snprintf(range, sizeof range, "%ld..%ld", low, high);
      const char *now = "";
      for (size_t i = 0; i < saved_count; i++)
        if (!strncmp(saved[i], variable, strlen(variable)) && saved[i][strlen(variable)] == '=')
          now = saved[i] + strlen(variable) + 1;
      printf("  %-30s %10ld  %-24s %s\n", variable, value, range, now);
    }
    printf("  %-30s %10d  %-24s %s\n", "TESSERA_HEAP_REPORT", 0, "0..1", "(set by --heap-report)");
  }
  /* No dlclose: the library registered fork handlers and a thread key when
   * it started; leaving it mapped until this short-lived process exits is
   * the safe choice. */
  for (size_t i = 0; i < saved_count; i++) {
    putenv(saved[i]); /* environ keeps the string: not freed */
  }
  free(saved); /* the array only; the strings now belong to environ */
}

/* ---- running the program -------------------------------------------------- */

static pid_t child_pid;

static void forward_signal(int sig) {
  if (child_pid > 0) kill(child_pid, sig);
}

static bool prepend_preload(const char *library) {
  const char *old = getenv("LD_PRELOAD");
  size_t size = strlen(library) + (old ? strlen(old) : 0) + 2;
  char *value = malloc(size);
  if (!value) return false;
  if (old && old[0])
    snprintf(value, size, "%s:%s", library, old);
  else
    snprintf(value, size, "%s", library);
  int rc = setenv("LD_PRELOAD", value, 1);
  free(value);
  return rc == 0;
}

int cmd_run(int argc, char **argv) {
  run_args_t args;
  int rc = parse_run_args(argc, argv, &args);
  if (rc != 0) return rc;
  if (args.secure && args.lib) {
    /* Either would be silently ignored: say which library is meant. */
    fprintf(stderr, "tessera run: --secure and --lib exclude each other (--secure preloads "
            "libtessera-secure.so from next to this binary; --lib PATH preloads PATH)\n");
    return 2;
  }
  char library[PATH_MAX];
  if (args.help) {
    run_usage(stdout);
    if (resolve_library(&args, library, sizeof library))
      print_library_options(library);
    return 0;
  }
  if (args.program_index < 0) {
    run_usage(stderr);
    return 2;
  }
  if (!resolve_library(&args, library, sizeof library)) return 2;
  if (!prepend_preload(library) || (args.stats && setenv("TESSERA_SHOW_STATS", "1", 1) != 0) ||
      (args.heap_report && setenv("TESSERA_HEAP_REPORT", "1", 1) != 0)) {
    fprintf(stderr, "tessera run: cannot set the environment: %s\n", strerror(errno));
    return 2;
  }
  fflush(NULL);
  char **program_argv = argv + args.program_index;
  child_pid = fork();
  if (child_pid < 0) {
    fprintf(stderr, "tessera run: fork: %s\n", strerror(errno));
    return 2;
  }
  if (child_pid == 0) {
    execvp(program_argv[0], program_argv);
    int err = errno;
    fprintf(stderr, "tessera run: cannot execute '%s': %s\n", program_argv[0], strerror(err));
    _exit(err == ENOENT ? 127 : 126);
  }
  /* Like a shell: the terminal's ^C/^\ reach the child directly; a TERM or
   * HUP sent to tessera is passed on so the program can clean up. */
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  signal(SIGTERM, forward_signal);
  signal(SIGHUP, forward_signal);
  int status = 0;
  while (waitpid(child_pid, &status, 0) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "tessera run: waitpid: %s\n", strerror(errno));
      return 2;
    }
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
