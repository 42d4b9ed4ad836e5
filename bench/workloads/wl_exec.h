/* Helpers for the real-program workloads (real_*.c): finding an installed
 * program on PATH and the exit status that means "not installed here".
 * A workload that exits with WL_UNAVAILABLE after printing one line on
 * stderr (what is missing and how to install it) is reported by the runner
 * as skipped, never as passed or failed. */
#ifndef TESSERA_BENCH_WL_EXEC_H
#define TESSERA_BENCH_WL_EXEC_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WL_UNAVAILABLE 77

/* Finds NAME on PATH (or uses it as given when it contains a '/');
 * returns 1 and fills out[PATH_MAX] when it is an executable file. */
static inline int wl_find_program(const char *name, char *out) {
  if (strchr(name, '/')) {
    snprintf(out, PATH_MAX, "%s", name);
    return access(out, X_OK) == 0;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  while (*path) {
    size_t len = strcspn(path, ":");
    if (len > 0 && len < PATH_MAX - strlen(name) - 2) {
      snprintf(out, PATH_MAX, "%.*s/%s", (int)len, path, name);
      if (access(out, X_OK) == 0) return 1;
    }
    path += len;
    if (*path == ':') path++;
  }
  return 0;
}

static inline void wl_unavailable(const char *what, const char *install) {
  fprintf(stderr, "%s not installed (%s)\n", what, install);
  exit(WL_UNAVAILABLE);
}

#endif
