/* grow_rss.c — a buffer grown by realloc in steps, written as it grows, and
 * the peak RSS that costs (security.grow_rss_*).
 *
 *   grow_rss TOTAL_MB STEP_KB [MAX_PERCENT]
 *
 * Grows one buffer from STEP_KB to TOTAL_MB by STEP_KB per realloc (each
 * new part written, the whole checked at the end) and prints the peak RSS
 * above the start (VmHWM - VmRSS before, /proc/self/status). With
 * MAX_PERCENT it fails (exit 1) when that peak is above MAX_PERCENT % of
 * TOTAL_MB plus 8 MiB of slack. A realloc that copies the buffer when it
 * outgrows its mapping holds the old and the new copy at once (about 2x);
 * one that moves the pages (mremap) holds the buffer once. Standard names
 * only: run with the library under test preloaded (exit 3 when no
 * libtessera is loaded, so a broken preload cannot pass) or on glibc
 * (TESSERA_ANY=1) to compare. Built with -fno-builtin. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* VmRSS or VmHWM of this process, in KiB (-1 if unreadable). */
static long status_kib(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long kib = -1;
  size_t len = strlen(field);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, len) == 0 && line[len] == ':') kib = strtol(line + len + 1, NULL, 10);
  fclose(f);
  return kib;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s TOTAL_MB STEP_KB [MAX_PERCENT]\n", argv[0]);
    return 2;
  }
  if (dlsym(RTLD_DEFAULT, "tes_malloc") == NULL && getenv("TESSERA_ANY") == NULL) {
    fprintf(stderr, "%s: no libtessera loaded (LD_PRELOAD it, or set TESSERA_ANY=1)\n", argv[0]);
    return 3;
  }
  size_t total = (size_t)strtoul(argv[1], NULL, 10) << 20;
  size_t step = (size_t)strtoul(argv[2], NULL, 10) << 10;
  long max_percent = argc == 4 ? strtol(argv[3], NULL, 10) : 0;
  if (total == 0 || step == 0 || step > total) {
    fprintf(stderr, "%s: bad sizes\n", argv[0]);
    return 2;
  }
  long start_kib = status_kib("VmRSS");
  unsigned char *p = NULL;
  size_t size = 0;
  while (size < total) {
    size_t next = size + step < total ? size + step : total;
    unsigned char *q = realloc(p, next);
    if (q == NULL) {
      fprintf(stderr, "%s: realloc to %zu bytes failed\n", argv[0], next);
      return 1;
    }
    p = q;
    for (size_t i = size; i < next; i += 512) p[i] = (unsigned char)(i >> 9);
    size = next;
  }
  for (size_t i = 0; i < size; i += 512)
    if (p[i] != (unsigned char)(i >> 9)) {
      printf("contents lost at byte %zu\n", i);
      return 1;
    }
  long peak_kib = status_kib("VmHWM");
  free(p);
  if (start_kib < 0 || peak_kib < 0) {
    fprintf(stderr, "%s: cannot read /proc/self/status\n", argv[0]);
    return 1;
  }
  long grown_kib = peak_kib - start_kib;
  long total_kib = (long)(total >> 10);
  printf("grew to %zu MiB by %zu KiB: contents kept; peak RSS %ld KiB above the start (%.2fx the buffer)\n",
         total >> 20, step >> 10, grown_kib, (double)grown_kib / (double)total_kib);
  if (max_percent > 0 && grown_kib > total_kib * max_percent / 100 + 8192) {
    printf("FAIL: peak above %ld%% of the buffer plus 8 MiB\n", max_percent);
    return 1;
  }
  return 0;
}
