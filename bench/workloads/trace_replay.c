/* Workload `traces`: replays malloc-lab trace files (`a id size`, `f id`,
 * `r id size` after a four-line header) through the real malloc, free and
 * realloc — the same request streams the lab scores its textbook allocators
 * on, here timed on production allocators. Usage: trace_replay [--scale F]
 * FILE... All files are parsed up front (one allocation each), then replayed
 * round-robin as many times as --scale asks. Every block's first byte carries
 * a tag derived from its slot and is checked at realloc and free.
 *
 * Parsing is the lab's (lab/trace.c, as `tessera lab` does it), so a
 * malformed file is refused the same way: `file:line: problem` on stderr and
 * exit status 2, and every array is bounded by what the files really hold
 * (ids are renumbered into dense slots), never by numbers written in them.
 * Traces that need more than 1 GiB in one request (syn-largemem) are skipped
 * with a note: the production allocators would really map that much.
 *
 * --mode per-trace adds, before the totals, one line per trace:
 *   trace=NAME first_s=T rest_s=T minflt_first=N minflt_rest=N
 * its replay time and minor page faults in the first pass and in the passes
 * after it, summed: which trace a difference between allocators comes from,
 * and whether it is faults on fresh memory (the first pass) or the recycling
 * of blocks (the later ones; PERFORMANCE.md, twenty-fourth session, trace24).
 * Then the faults taken before the first replay (start-up and parsing, which
 * work_s leaves out) and one line per pass over all traces:
 *   setup_minflt=N
 *   pass=K s=T minflt=N
 * An allocator that copies the parser's growing arrays (realloc) leaves
 * touched memory free for the first pass to reuse, one that grows them in
 * place (mremap) does not: minflt_first alone compares them unfairly (1,080
 * of 1,830 faults between tessera and mimalloc on the 64-bit set), and a
 * heap whose pages spread further each pass shows in the later passes' lines
 * (PERFORMANCE.md, twenty-fifth session, b64_25).
 * The clock and getrusage calls around every replay are inside work_s. */
#include "wl_common.h"

#include <sys/resource.h>

#include "trace.h"

#define HUGE_REQUEST (1ULL << 30)

/* Reads one trace; returns 0 when loaded, 1 when skipped on purpose. */
static int load_trace(const char *path, trace_t *t) {
  trace_error_t err;
  if (trace_load(path, t, &err) < 0) {
    fprintf(stderr, "%s\n", err.msg);
    exit(2);
  }
  if (t->max_request >= HUGE_REQUEST) {
    fprintf(stderr, "note: %s skipped (a request above 1 GiB)\n", path);
    trace_free(t);
    return 1;
  }
  return 0;
}

static void touch(unsigned char *p, size_t size, unsigned char tag) {
  p[0] = tag;
  for (size_t k = 4096; k < size; k += 4096) p[k] = tag;
  p[size - 1] = tag;
}

/* Replays one trace once; returns the number of requests performed. The
 * parser has already followed every block's state, so an `a` never finds a
 * live block and no request touches a freed one. */
static long replay(const trace_t *t, unsigned char **ptr, size_t *size) {
  memset(ptr, 0, t->n_slots * sizeof *ptr);
  for (size_t i = 0; i < t->num_ops; i++) {
    const trace_op_t *op = &t->ops[i];
    uint32_t s = op->slot;
    unsigned char tag = (unsigned char)(s * 31 + 7);
    if (op->kind == TRACE_OP_ALLOC) {
      size_t n = op->size ? (size_t)op->size : 1;
      unsigned char *p = wl_check(malloc(n), "malloc returned NULL");
      ptr[s] = p;
      size[s] = n;
      touch(p, n, tag);
    } else if (op->kind == TRACE_OP_FREE) {
      /* A negative id, or one holding NULL: free(NULL), as the lab does. */
      if (ptr[s] && ptr[s][0] != tag) wl_fail("block contents overwritten");
      free(ptr[s]);
      ptr[s] = NULL;
    } else {
      if (ptr[s] && ptr[s][0] != tag) wl_fail("block contents overwritten before realloc");
      /* realloc(p, 0) is implementation-defined: the lab's meaning (free, NULL). */
      if (op->size == 0) { free(ptr[s]); ptr[s] = NULL; continue; }
      unsigned char *p = wl_check(realloc(ptr[s], (size_t)op->size), "realloc returned NULL");
      if (ptr[s] && p[0] != tag) wl_fail("realloc lost the old contents");
      ptr[s] = p;
      size[s] = (size_t)op->size;
      touch(p, size[s], tag);
    }
  }
  for (size_t s = 0; s < t->n_slots; s++) free(ptr[s]);
  return (long)t->num_ops;
}

static long minor_faults(void) {
  struct rusage u;
  return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_minflt : 0;
}

/* One trace's replays, first pass and the passes after it (--mode per-trace). */
typedef struct {
  double first_s, rest_s;
  long minflt_first, minflt_rest;
} trace_split_t;

int main(int argc, char **argv) {
  static const char *const modes[] = {"per-trace", NULL};
  wl_options_t o = wl_parse_ex(argc, argv, "traces: replay malloc-lab trace files through the real malloc/free/realloc",
                               modes, -1);
  int per_trace = o.mode != NULL && !strcmp(o.mode, "per-trace");
  if (o.argc < 1) {
    fprintf(stderr, "trace_replay: give one or more trace files\n");
    return 2;
  }
  trace_t *traces = wl_check(calloc((size_t)o.argc, sizeof(trace_t)), "calloc returned NULL");
  int loaded = 0;
  size_t max_slots = 1;
  for (int i = 0; i < o.argc; i++) {
    if (load_trace(o.argv[i], &traces[loaded]) == 0) {
      if (traces[loaded].n_slots > max_slots) max_slots = traces[loaded].n_slots;
      loaded++;
    }
  }
  if (loaded == 0) {
    fprintf(stderr, "trace_replay: every trace was skipped\n");
    return 2;
  }
  unsigned char **ptr = wl_check(calloc(max_slots, sizeof *ptr), "calloc returned NULL");
  size_t *size = wl_check(calloc(max_slots, sizeof *size), "calloc returned NULL");
  trace_split_t *split = per_trace ? wl_check(calloc((size_t)loaded, sizeof *split), "calloc returned NULL") : NULL;
  long passes = wl_scaled(&o, 6, 1);
  trace_split_t *pass_split = per_trace ? wl_check(calloc((size_t)passes, sizeof *pass_split), "calloc returned NULL") : NULL;
  long setup_minflt = per_trace ? minor_faults() : 0;
  long ops = 0;
  double t0 = wl_now();
  for (long pass = 0; pass < passes; pass++) {
    long pass_f0 = per_trace ? minor_faults() : 0;
    double pass_t0 = per_trace ? wl_now() : 0;
    for (int i = 0; i < loaded; i++) {
      if (!per_trace) {
        ops += replay(&traces[i], ptr, size);
        continue;
      }
      long f0 = minor_faults();
      double a = wl_now();
      ops += replay(&traces[i], ptr, size);
      double t = wl_now() - a;
      long f = minor_faults() - f0;
      if (pass == 0) {
        split[i].first_s = t;
        split[i].minflt_first = f;
      } else {
        split[i].rest_s += t;
        split[i].minflt_rest += f;
      }
    }
    if (per_trace) {
      pass_split[pass].first_s = wl_now() - pass_t0;
      pass_split[pass].minflt_first = minor_faults() - pass_f0;
    }
  }
  double work = wl_now() - t0;
  for (int i = 0; per_trace && i < loaded; i++)
    printf("trace=%s first_s=%.6f rest_s=%.6f minflt_first=%ld minflt_rest=%ld\n", trace_basename(&traces[i]),
           split[i].first_s, split[i].rest_s, split[i].minflt_first, split[i].minflt_rest);
  if (per_trace) printf("setup_minflt=%ld\n", setup_minflt);
  for (long pass = 0; per_trace && pass < passes; pass++)
    printf("pass=%ld s=%.6f minflt=%ld\n", pass + 1, pass_split[pass].first_s, pass_split[pass].minflt_first);
  printf("traces=%d\n", loaded);
  wl_report(work, (double)ops);
  return 0;
}
