/* Workload `traces`: replays malloc-lab trace files (`a id size`, `f id`,
 * `r id size` after a four-line header) through the real malloc, free and
 * realloc — the same request streams the lab scores its textbook allocators
 * on, here timed on production allocators. Usage: trace_replay [--scale F]
 * FILE... All files are parsed up front (one allocation each), then replayed
 * round-robin as many times as --scale asks. Every block's first byte carries
 * a tag derived from its id and is checked at realloc and free.
 * Traces that need more than 1 GiB in one request (syn-largemem) are skipped
 * with a note. Malformed files are reported as `file:line: problem`. */
#include "wl_common.h"

#include <errno.h>

#define HUGE_REQUEST (1ULL << 30)

typedef struct op_s {
  char kind;     /* 'a', 'f' or 'r' */
  long id;       /* -1 for free(NULL) / realloc(NULL) */
  size_t size;
} op_t;

typedef struct trace_s {
  const char *path;
  op_t *ops;
  long n_ops;
  long n_ids;
} trace_t;

static void parse_error(const char *path, long line, const char *what) {
  fprintf(stderr, "%s:%ld: %s\n", path, line, what);
  exit(2);
}

/* Reads one trace; returns 0 when loaded, 1 when skipped on purpose. */
static int load_trace(const char *path, trace_t *t) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
    exit(2);
  }
  char line[256];
  long lineno = 0, header[4];
  for (int h = 0; h < 4; h++) {
    lineno++;
    if (!fgets(line, sizeof line, f)) parse_error(path, lineno, "missing header line");
    char *end;
    header[h] = strtol(line, &end, 10);
    while (*end == ' ' || *end == '\r' || *end == '\n' || *end == '\t') end++;
    if (end == line || *end) parse_error(path, lineno, "header line is not one integer");
  }
  long n_ids = header[1], n_ops = header[2];
  if (n_ids < 0 || n_ops < 0 || n_ops > 100000000) parse_error(path, 3, "implausible num_ids/num_ops");
  t->path = path;
  t->n_ids = n_ids;
  t->ops = wl_check(malloc((size_t)(n_ops > 0 ? n_ops : 1) * sizeof(op_t)), "malloc returned NULL");
  t->n_ops = 0;
  int huge = 0;
  while (t->n_ops < n_ops && fgets(line, sizeof line, f)) {
    lineno++;
    char kind;
    long id;
    unsigned long long size = 0;
    int fields = sscanf(line, " %c %ld %llu", &kind, &id, &size);
    if (fields < 1) continue; /* blank line */
    if (kind != 'a' && kind != 'f' && kind != 'r') parse_error(path, lineno, "unknown request (want a, f or r)");
    if (fields < 2 || (kind != 'f' && fields < 3)) parse_error(path, lineno, "request is missing a field");
    if (id >= n_ids) parse_error(path, lineno, "id is not below num_ids");
    if (size >= HUGE_REQUEST) huge = 1;
    op_t *op = &t->ops[t->n_ops++];
    op->kind = kind;
    op->id = id < 0 ? -1 : id;
    op->size = (size_t)size;
  }
  fclose(f);
  if (t->n_ops < n_ops) parse_error(path, lineno, "fewer requests than num_ops says");
  if (huge) {
    fprintf(stderr, "note: %s skipped (a request above 1 GiB)\n", path);
    free(t->ops);
    return 1;
  }
  return 0;
}

static void touch(unsigned char *p, size_t size, unsigned char tag) {
  p[0] = tag;
  for (size_t k = 4096; k < size; k += 4096) p[k] = tag;
  p[size - 1] = tag;
}

/* Replays one trace once; returns the number of requests performed. */
static long replay(const trace_t *t, unsigned char **ptr, size_t *size) {
  memset(ptr, 0, (size_t)t->n_ids * sizeof *ptr);
  for (long i = 0; i < t->n_ops; i++) {
    const op_t *op = &t->ops[i];
    unsigned char tag = (unsigned char)(op->id * 31 + 7);
    unsigned char **slot = op->id >= 0 ? &ptr[op->id] : NULL;
    if (op->kind == 'a') {
      unsigned char *p = wl_check(malloc(op->size ? op->size : 1), "malloc returned NULL");
      if (slot) { free(*slot); *slot = p; size[op->id] = op->size ? op->size : 1; touch(p, size[op->id], tag); }
      else free(p);
    } else if (op->kind == 'f') {
      if (slot && *slot) {
        if ((*slot)[0] != tag) wl_fail("block contents overwritten");
        free(*slot);
        *slot = NULL;
      } else {
        free(NULL);
      }
    } else {
      if (!slot) continue;
      if (*slot && (*slot)[0] != tag) wl_fail("block contents overwritten before realloc");
      if (op->size == 0) { free(*slot); *slot = NULL; continue; }
      unsigned char *p = wl_check(realloc(*slot, op->size), "realloc returned NULL");
      if (*slot && p[0] != tag) wl_fail("realloc lost the old contents");
      *slot = p;
      size[op->id] = op->size;
      touch(p, op->size, tag);
    }
  }
  for (long id = 0; id < t->n_ids; id++) free(ptr[id]);
  return t->n_ops;
}

int main(int argc, char **argv) {
  wl_options_t o = wl_parse(argc, argv, "traces: replay malloc-lab trace files through the real malloc/free/realloc");
  if (o.argc < 1) {
    fprintf(stderr, "trace_replay: give one or more trace files\n");
    return 2;
  }
  trace_t *traces = wl_check(calloc((size_t)o.argc, sizeof(trace_t)), "calloc returned NULL");
  int loaded = 0;
  long max_ids = 1;
  for (int i = 0; i < o.argc; i++) {
    if (load_trace(o.argv[i], &traces[loaded]) == 0) {
      if (traces[loaded].n_ids > max_ids) max_ids = traces[loaded].n_ids;
      loaded++;
    }
  }
  if (loaded == 0) {
    fprintf(stderr, "trace_replay: every trace was skipped\n");
    return 2;
  }
  unsigned char **ptr = wl_check(malloc((size_t)max_ids * sizeof *ptr), "malloc returned NULL");
  size_t *size = wl_check(malloc((size_t)max_ids * sizeof *size), "malloc returned NULL");
  long passes = wl_scaled(&o, 6, 1);
  long ops = 0;
  double t0 = wl_now();
  for (long pass = 0; pass < passes; pass++)
    for (int i = 0; i < loaded; i++) ops += replay(&traces[i], ptr, size);
  double work = wl_now() - t0;
  printf("traces=%d\n", loaded);
  wl_report(work, (double)ops);
  return 0;
}
