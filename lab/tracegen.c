/* tracegen: the classic malloc-lab stress patterns, seeded (see tracegen.h).
 *
 * Each pattern appends requests to a growable op list through emit_*();
 * the emitter hands out ids in allocation order, tracks the live payload and
 * its peak (for header line 1), and refuses a free of a block that is not
 * live, so a pattern bug shows up as an error here and not as a broken file.
 * The text is produced at the end, when num_ids and num_ops are known. */
#include "tracegen.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEN_MAX_OPS ((size_t)50 * 1000 * 1000)

typedef struct gen_op_s {
  uint64_t size;
  uint32_t id;
  char kind;
} gen_op_t;

typedef struct gen_s {
  uint64_t rng;
  gen_op_t *ops;
  size_t n, cap;
  uint64_t *size_of;    /* per id: live size (UINT64_MAX once freed) */
  size_t ids, ids_cap;
  uint64_t live, peak;
  uint64_t max_size;    /* every request is clamped to this */
  bool failed;
} gen_t;

/* splitmix64: tiny, fast, and fully determined by the seed. */
static uint64_t rnd(gen_t *g) {
  uint64_t z = (g->rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static uint64_t rnd_range(gen_t *g, uint64_t lo, uint64_t hi) {
  return hi <= lo ? lo : lo + rnd(g) % (hi - lo + 1);
}

static double rnd_unit(gen_t *g) { return (double)(rnd(g) >> 11) * 0x1.0p-53; }

/* Pareto-distributed integer in [lo, hi]: most values near lo, a long tail. */
static uint64_t rnd_power(gen_t *g, uint64_t lo, uint64_t hi, double alpha) {
  double x = (double)lo * pow(1.0 - rnd_unit(g), -1.0 / alpha);
  return x >= (double)hi ? hi : (uint64_t)x;
}

static bool push(gen_t *g, char kind, uint32_t id, uint64_t size) {
  if (g->failed) return false;
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 1024;
    gen_op_t *ops = realloc(g->ops, cap * sizeof *ops);
    if (!ops) return g->failed = true, false;
    g->ops = ops;
    g->cap = cap;
  }
  g->ops[g->n++] = (gen_op_t){.size = size, .id = id, .kind = kind};
  return true;
}

/* Allocate a new block; returns its id (UINT32_MAX on failure). */
static uint32_t emit_alloc(gen_t *g, uint64_t size) {
  if (size > g->max_size) size = g->max_size;
  if (size == 0) size = 1;
  if (g->ids == g->ids_cap) {
    size_t cap = g->ids_cap ? g->ids_cap * 2 : 1024;
    uint64_t *s = realloc(g->size_of, cap * sizeof *s);
    if (!s) return g->failed = true, UINT32_MAX;
    g->size_of = s;
    g->ids_cap = cap;
  }
  uint32_t id = (uint32_t)g->ids++;
  g->size_of[id] = size;
  if (!push(g, 'a', id, size)) return UINT32_MAX;
  g->live += size;
  if (g->live > g->peak) g->peak = g->live;
  return id;
}

static void emit_free(gen_t *g, uint32_t id) {
  if (id >= g->ids || g->size_of[id] == UINT64_MAX) { g->failed = true; return; }
  g->live -= g->size_of[id];
  g->size_of[id] = UINT64_MAX;
  push(g, 'f', id, 0);
}

static void emit_realloc(gen_t *g, uint32_t id, uint64_t size) {
  if (size > g->max_size) size = g->max_size;
  if (id >= g->ids || g->size_of[id] == UINT64_MAX || size == 0) { g->failed = true; return; }
  g->live = g->live - g->size_of[id] + size;
  if (g->live > g->peak) g->peak = g->live;
  g->size_of[id] = size;
  push(g, 'r', id, size);
}

static void shuffle_u32(gen_t *g, uint32_t *a, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)(rnd(g) % i);
    uint32_t t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

/* random: n blocks of uniform random size; the 2n events are a random
 * shuffle of two tokens per block, the first one allocating it and the
 * second freeing it, so lifetimes are random and about half the blocks are
 * live at the peak (like random-bal). */
static void gen_random(gen_t *g, size_t ops, uint64_t max_size) {
  size_t n = ops / 2 ? ops / 2 : 1;
  uint32_t *tok = malloc(2 * n * sizeof *tok);
  uint32_t *id_of = malloc(n * sizeof *id_of);
  if (!tok || !id_of) { g->failed = true; goto out; }
  for (size_t i = 0; i < 2 * n; i++) tok[i] = (uint32_t)(i / 2);
  shuffle_u32(g, tok, 2 * n);
  memset(id_of, 0xff, n * sizeof *id_of);
  for (size_t i = 0; i < 2 * n; i++) {
    uint32_t b = tok[i];
    if (id_of[b] == UINT32_MAX) id_of[b] = emit_alloc(g, rnd_range(g, 1, max_size));
    else emit_free(g, id_of[b]);
  }
out:
  free(tok);
  free(id_of);
}

/* binary: k pairs of (small, large) blocks, then every small one is freed
 * and k blocks a little larger than a small hole are requested: a policy
 * that cannot reuse the holes grows the heap by all of them. */
static void gen_binary(gen_t *g, size_t ops, uint64_t max_size) {
  size_t k = ops / 6 ? ops / 6 : 1;
  uint64_t cap = max_size < 64 ? 64 : max_size;
  uint64_t small = rnd_range(g, 8, cap / 16 < 8 ? 8 : (cap / 16 > 64 ? 64 : cap / 16));
  uint64_t large = rnd_range(g, small * 4, small * 8 > cap ? cap : small * 8);
  uint64_t bigger = rnd_range(g, small + 1, small * 2);
  uint32_t *ids = malloc(3 * k * sizeof *ids);
  if (!ids) { g->failed = true; return; }
  for (size_t i = 0; i < k; i++) {
    ids[2 * i] = emit_alloc(g, small);
    ids[2 * i + 1] = emit_alloc(g, large);
  }
  for (size_t i = 0; i < k; i++) emit_free(g, ids[2 * i]);
  for (size_t i = 0; i < k; i++) ids[2 * k + i] = emit_alloc(g, bigger);
  for (size_t i = 0; i < k; i++) emit_free(g, ids[2 * i + 1]);
  for (size_t i = 0; i < k; i++) emit_free(g, ids[2 * k + i]);
  free(ids);
}

/* coalescing: allocate two neighbours, free both, then ask for a block as
 * large as the two together: only coalescing lets it reuse the space. The
 * size grows from round to round and wraps at max_size. */
static void gen_coalescing(gen_t *g, size_t ops, uint64_t max_size) {
  size_t rounds = ops / 6 ? ops / 6 : 1;
  uint64_t half = max_size / 2 ? max_size / 2 : 1;
  uint64_t s = rnd_range(g, 1, half / 4 ? half / 4 : 1);
  for (size_t i = 0; i < rounds; i++) {
    uint32_t x = emit_alloc(g, s), y = emit_alloc(g, s);
    emit_free(g, x);
    emit_free(g, y);
    emit_free(g, emit_alloc(g, 2 * s));
    s += rnd_range(g, 1, 64);
    if (s > half) s = rnd_range(g, 1, half < 64 ? half : 64);
  }
}

/* realloc: several interleaved growth chains; between two growth steps of a
 * chain a small block is allocated and the previous small one freed, so a
 * block that cannot grow in place is moved past fresh obstacles. */
static void gen_realloc(gen_t *g, size_t ops, uint64_t max_size, unsigned chains) {
  if (chains == 0) chains = 4;
  if (chains > 1024) chains = 1024;
  uint32_t block[1024], small[1024];
  uint64_t step[1024], size[1024];
  for (unsigned c = 0; c < chains; c++) {
    size[c] = rnd_range(g, 16, 512);
    step[c] = rnd_range(g, 16, 256);
    block[c] = emit_alloc(g, size[c]);
    small[c] = emit_alloc(g, rnd_range(g, 16, 128));
  }
  size_t steps = ops / 3;
  for (size_t i = 0; i < steps && !g->failed; i++) {
    unsigned c = (unsigned)(rnd(g) % chains);
    size[c] += step[c];
    if (size[c] > max_size) {  /* chain done: start a new one */
      emit_free(g, block[c]);
      size[c] = rnd_range(g, 16, 512);
      block[c] = emit_alloc(g, size[c]);
    } else {
      emit_realloc(g, block[c], size[c]);
    }
    uint32_t old = small[c];
    small[c] = emit_alloc(g, rnd_range(g, 16, 128));
    emit_free(g, old);
  }
  for (unsigned c = 0; c < chains; c++) {
    emit_free(g, block[c]);
    emit_free(g, small[c]);
  }
}

/* Power-law mixes of the three kinds of objects real programs allocate. */
enum { KIND_ARRAY, KIND_STRUCT, KIND_STRING };

static uint64_t object_size(gen_t *g, int kind, uint64_t max_size) {
  static const uint64_t struct_sizes[] = {16, 24, 32, 48, 56, 64, 72, 96, 128, 160, 200, 248};
  static const uint64_t elem_sizes[] = {1, 2, 4, 8, 8, 8, 12, 16, 24, 32};
  uint64_t s;
  switch (kind) {
  case KIND_STRUCT: {
    /* Zipf-like: the first struct types are by far the most common. */
    size_t n = sizeof struct_sizes / sizeof struct_sizes[0];
    size_t i = (size_t)rnd_power(g, 1, n, 1.2) - 1;
    s = struct_sizes[i < n ? i : n - 1];
    break;
  }
  case KIND_STRING:
    s = rnd_power(g, 2, 256, 1.3);  /* length + NUL */
    break;
  default:
    s = elem_sizes[rnd(g) % (sizeof elem_sizes / sizeof elem_sizes[0])] *
        rnd_power(g, 1, 4096, 0.9);
    break;
  }
  return s > max_size ? max_size : (s ? s : 1);
}

typedef struct death_s {
  uint64_t time;
  uint32_t id;
} death_t;

static void heap_push(death_t *h, size_t *n, death_t d) {
  size_t i = (*n)++;
  while (i > 0 && h[(i - 1) / 2].time > d.time) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = d;
}

static death_t heap_pop(death_t *h, size_t *n) {
  death_t top = h[0], last = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1].time < h[c].time) c++;
    if (h[c].time >= last.time) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = last;
  return top;
}

/* Objects of the chosen kinds with power-law lifetimes: most die young, a
 * few live for most of the trace (like the syn-* traces). kinds_mask picks
 * from array/struct/string uniformly. */
static void gen_objects(gen_t *g, size_t ops, uint64_t max_size, unsigned kinds_mask) {
  size_t n = ops / 2 ? ops / 2 : 1;
  death_t *h = malloc(n * sizeof *h);
  if (!h) { g->failed = true; return; }
  size_t hn = 0;
  int kinds[3], nk = 0;
  for (int k = 0; k < 3; k++)
    if (kinds_mask & (1u << k)) kinds[nk++] = k;
  for (uint64_t t = 0; t < n && !g->failed; t++) {
    while (hn && h[0].time <= t) emit_free(g, heap_pop(h, &hn).id);
    int kind = kinds[rnd(g) % (uint64_t)nk];
    uint32_t id = emit_alloc(g, object_size(g, kind, max_size));
    if (id == UINT32_MAX) break;
    heap_push(h, &hn, (death_t){.time = t + rnd_power(g, 1, n, 0.6), .id = id});
  }
  while (hn && !g->failed) emit_free(g, heap_pop(h, &hn).id);
  free(h);
}

/* largemem: a few multi-GiB blocks (3 GiB up to max_size) among small ones,
 * like the 64-bit set's syn-largemem: small blocks live before the first
 * huge request (so a heap that starts with small tags has live blocks when
 * it must describe a huge one), at most two huge blocks live at a time
 * (older ones freed, so later huge requests reuse and split their space),
 * two adjacent huge blocks freed together (coalescing) and asked for again
 * as one, and a small block realloc'ed past 4 GiB and later back down.
 * Sizes only: replaying it touches no more than the driver's checked
 * windows, and copies stay small (no huge block is grown by realloc, which a
 * policy without in-place realloc would copy). */
static void gen_largemem(gen_t *g, size_t ops, uint64_t max_size) {
  const uint64_t gib = (uint64_t)1 << 30;
  uint64_t huge_lo = max_size < 3 * gib ? max_size : 3 * gib;
  size_t rounds = 6, smalls = ops / (2 * rounds) ? ops / (2 * rounds) : 1;
  uint32_t live_small[64], huge[2] = {UINT32_MAX, UINT32_MAX};
  size_t nsmall = 0;
  for (int i = 0; i < 4; i++) live_small[nsmall++] = emit_alloc(g, rnd_range(g, 1, 256));
  for (size_t r = 0; r < rounds && !g->failed; r++) {
    if (huge[r % 2] != UINT32_MAX) emit_free(g, huge[r % 2]);
    huge[r % 2] = emit_alloc(g, rnd_range(g, huge_lo, max_size));
    for (size_t i = 0; i < smalls && !g->failed; i++) {
      /* Keep a bounded set of small blocks, replacing a random one. */
      if (nsmall == 64 || (nsmall && rnd(g) % 2)) {
        size_t k = (size_t)(rnd(g) % nsmall);
        emit_free(g, live_small[k]);
        live_small[k] = live_small[--nsmall];
      }
      live_small[nsmall++] = emit_alloc(g, rnd_range(g, 1, 4096));
    }
  }
  for (int i = 0; i < 2; i++) emit_free(g, huge[i]);
  /* Two adjacent huge blocks, freed together, asked for again as one. */
  uint64_t a_size = rnd_range(g, huge_lo, max_size / 2 > huge_lo ? max_size / 2 : huge_lo);
  uint64_t b_size = rnd_range(g, huge_lo, max_size / 2 > huge_lo ? max_size / 2 : huge_lo);
  uint32_t a = emit_alloc(g, a_size), b = emit_alloc(g, b_size);
  emit_free(g, a);
  emit_free(g, b);
  uint32_t ab = emit_alloc(g, a_size + b_size);
  /* A small block grown past 4 GiB by realloc, then shrunk back. */
  uint32_t grow = emit_alloc(g, rnd_range(g, 100, 2000));
  if (nsmall == 64) emit_free(g, live_small[--nsmall]);
  live_small[nsmall++] = emit_alloc(g, rnd_range(g, 1, 64)); /* blocks it in place */
  emit_realloc(g, grow, rnd_range(g, 4 * gib + 1, 4 * gib + 64 * ((uint64_t)1 << 20)));
  emit_realloc(g, grow, rnd_range(g, 100, 2000));
  emit_free(g, grow);
  emit_free(g, ab);
  while (nsmall) emit_free(g, live_small[--nsmall]);
}

typedef struct pattern_def_s {
  tracegen_pattern_t info;
  size_t default_ops;
  uint64_t default_max;
} pattern_def_t;

static const pattern_def_t patterns[] = {
  {{"random", "random sizes and random lifetimes (like random-bal)"}, 4800, 32768},
  {{"binary", "small/large pairs; small ones freed, slightly larger ones requested"}, 12000, 512},
  {{"coalescing", "allocate two neighbours, free both, request their sum; growing"}, 14400, 8192},
  {{"realloc", "interleaved realloc growth chains with small blocks in between"}, 14400, 1 << 20},
  {{"array", "power-law arrays (element size x count), power-law lifetimes"}, 8000, 25000},
  {{"struct", "a few struct sizes, Zipf-distributed, power-law lifetimes"}, 8000, 256},
  {{"string", "power-law string lengths up to 255, power-law lifetimes"}, 8000, 256},
  {{"mix", "arrays, structs and strings mixed, power-law lifetimes"}, 8000, 25000},
  {{NULL, NULL}, 0, 0},
  /* Named only: not in tracegen_patterns() (the demo and 'gen all' use that
   * list), because replaying it needs tens of GiB of heap address space. */
  {{"largemem", "a few blocks of 3 GiB to 40 GiB among small ones, a realloc past 4 GiB"},
   200, (uint64_t)40 << 30},
  {{NULL, NULL}, 0, 0},
};

static const tracegen_pattern_t *pattern_list(void) {
  static tracegen_pattern_t list[sizeof patterns / sizeof patterns[0]];
  for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) list[i] = patterns[i].info;
  return list;
}

const tracegen_pattern_t *tracegen_patterns(void) { return pattern_list(); }

const tracegen_pattern_t *tracegen_named_only_patterns(void) {
  const tracegen_pattern_t *p = pattern_list();
  while (p->name) p++;
  return p + 1;
}

static int errorf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int errorf(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

int tracegen_text(const char *pattern, const tracegen_params_t *params, char **text,
                  size_t *len, char *err, size_t errlen) {
  *text = NULL;
  *len = 0;
  const pattern_def_t *def = NULL;
  for (const pattern_def_t *p = patterns; p < patterns + sizeof patterns / sizeof patterns[0]; p++)
    if (p->info.name && !strcmp(p->info.name, pattern)) def = p;
  if (!def) return errorf(err, errlen, "unknown pattern '%s'", pattern);
  size_t ops = params->ops ? params->ops : def->default_ops;
  uint64_t max_size = params->max_size ? params->max_size : def->default_max;
  if (ops > GEN_MAX_OPS) return errorf(err, errlen, "--ops %zu is above the limit %zu", ops, GEN_MAX_OPS);
  if (max_size > ((uint64_t)1 << 40))
    return errorf(err, errlen, "--max-size %llu is above the limit 2^40",
                  (unsigned long long)max_size);

  gen_t g = {.rng = params->seed ^ 0x5445535345524121ull, .max_size = max_size};
  if (!strcmp(pattern, "random")) gen_random(&g, ops, max_size);
  else if (!strcmp(pattern, "binary")) gen_binary(&g, ops, max_size);
  else if (!strcmp(pattern, "coalescing")) gen_coalescing(&g, ops, max_size);
  else if (!strcmp(pattern, "realloc")) gen_realloc(&g, ops, max_size, params->chains);
  else if (!strcmp(pattern, "array")) gen_objects(&g, ops, max_size, 1u << KIND_ARRAY);
  else if (!strcmp(pattern, "struct")) gen_objects(&g, ops, max_size, 1u << KIND_STRUCT);
  else if (!strcmp(pattern, "string")) gen_objects(&g, ops, max_size, 1u << KIND_STRING);
  else if (!strcmp(pattern, "largemem")) gen_largemem(&g, ops, max_size);
  else gen_objects(&g, ops, max_size, 7u);

  int rc = -1;
  char *buf = NULL;
  size_t buflen = 0;
  FILE *out = g.failed ? NULL : open_memstream(&buf, &buflen);
  if (!out) {
    errorf(err, errlen, "out of memory generating '%s'", pattern);
    goto done;
  }
  fprintf(out, "%llu\n%zu\n%zu\n1\n", (unsigned long long)(g.peak < 4 ? 4 : g.peak), g.ids, g.n);
  for (size_t i = 0; i < g.n; i++) {
    const gen_op_t *op = &g.ops[i];
    if (op->kind == 'f') fprintf(out, "f %u\n", op->id);
    else fprintf(out, "%c %u %llu\n", op->kind, op->id, (unsigned long long)op->size);
  }
  if (fclose(out) != 0) {
    free(buf);
    errorf(err, errlen, "out of memory generating '%s'", pattern);
    goto done;
  }
  *text = buf;
  *len = buflen;
  rc = 0;
done:
  free(g.ops);
  free(g.size_of);
  return rc;
}

int tracegen_trace(const char *pattern, const tracegen_params_t *params, trace_t *trace,
                   char *err, size_t errlen) {
  char *text;
  size_t len;
  memset(trace, 0, sizeof *trace);
  if (tracegen_text(pattern, params, &text, &len, err, errlen) < 0) return -1;
  char name[96];
  snprintf(name, sizeof name, "%s-s%llu", pattern, (unsigned long long)params->seed);
  trace_error_t perr;
  int rc = trace_parse_buffer(name, text, len, trace, &perr);
  free(text);
  if (rc < 0) return errorf(err, errlen, "generated trace does not parse: %s", perr.msg);
  return 0;
}
