/* lab.tracegen: the generator is deterministic (same seed, same bytes;
 * another seed, other bytes), every pattern gives a balanced trace that
 * parses, honours --ops and --max-size, shows the shape it is named for,
 * and replays validly on the system allocator and on the default policy;
 * the named-only largemem pattern likewise (default policy only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "memlib.h"
#include "tracegen.h"

#include "check.h"

static char *gen(const char *pattern, uint64_t seed, size_t ops, uint64_t max_size, size_t *len) {
  tracegen_params_t p = {.seed = seed, .ops = ops, .max_size = max_size};
  char *text = NULL, err[256];
  if (tracegen_text(pattern, &p, &text, len, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", pattern, err);
    failures++;
  }
  return text;
}

static void test_pattern(const char *pattern, driver_t *d) {
  size_t la, lb, lc;
  char *a = gen(pattern, 42, 3000, 0, &la);
  char *b = gen(pattern, 42, 3000, 0, &lb);
  char *c = gen(pattern, 43, 3000, 0, &lc);
  if (!a || !b || !c) return;
  CHECK(la == lb && memcmp(a, b, la) == 0);
  CHECK(la != lc || memcmp(a, c, la) != 0);

  trace_t t;
  trace_error_t err;
  CHECK(trace_parse_buffer(pattern, a, la, &t, &err) == 0);
  CHECK(t.format == TRACE_FORMAT_CLASSIC);
  CHECK(t.n_live_at_end == 0);          /* balanced */
  CHECK(t.n_free_null == 0 && t.stray_lines == 0);
  CHECK(t.num_ops >= 2700 && t.num_ops <= 3300);
  CHECK(t.n_slots == t.num_ids);         /* ids 0..num_ids-1 all used */
  CHECK(t.header[0] == t.peak_live || t.peak_live < 4);

  driver_config_t cfg = {.align = 8, .check_every = 0, .check_only = true};
  driver_result_t r;
  CHECK(driver_run(d, driver_system_policy(), &t, &cfg, &r) == 0);
  CHECK(driver_run(d, lab_policy_default(), &t, &cfg, &r) == 0);
  if (!r.valid) fprintf(stderr, "%s\n", r.error);
  trace_free(&t);

  /* --max-size caps every request. */
  size_t lm;
  char *m = gen(pattern, 7, 2000, 100, &lm);
  CHECK(m && trace_parse_buffer(pattern, m, lm, &t, &err) == 0);
  CHECK(t.max_request <= 100);
  trace_free(&t);
  free(m);
  free(a);
  free(b);
  free(c);
}

/* Each pattern shows the structure it is named for. */
static void test_shapes(void) {
  trace_t t;
  char err[256];
  tracegen_params_t p = {.seed = 3, .ops = 6000};
  CHECK(tracegen_trace("realloc", &p, &t, err, sizeof err) == 0);
  CHECK(t.n_realloc > 1000);
  CHECK(!strcmp(t.name, "realloc-s3"));
  trace_free(&t);

  CHECK(tracegen_trace("binary", &p, &t, err, sizeof err) == 0);
  /* 2k allocations of pairs, k frees, k larger ones: 2 distinct sizes in the
   * first half, and the third size is larger than the small one. */
  size_t k = t.num_ops / 6;
  CHECK(t.n_alloc == 3 * k && t.n_free == 3 * k && t.n_realloc == 0);
  CHECK(t.ops[2 * k + k].kind == TRACE_OP_ALLOC && t.ops[3 * k].size > t.ops[0].size);
  CHECK(t.ops[0].size < t.ops[1].size);
  trace_free(&t);

  CHECK(tracegen_trace("coalescing", &p, &t, err, sizeof err) == 0);
  CHECK(t.ops[4].kind == TRACE_OP_ALLOC && t.ops[4].size == 2 * t.ops[0].size);
  trace_free(&t);

  CHECK(tracegen_trace("struct", &p, &t, err, sizeof err) == 0);
  CHECK(t.max_request <= 248);
  trace_free(&t);

  CHECK(tracegen_trace("nonsense", &p, &t, err, sizeof err) == -1);
  CHECK(!strcmp(err, "unknown pattern 'nonsense'"));
}

/* largemem: generated only when named, balanced, deterministic, with several
 * blocks of at least 3 GiB, one of two adjacent huge blocks' sum, a realloc
 * past 4 GiB and back, small blocks live before the first huge one; and
 * replayed validly by the default policy with its checker (the heap's wide
 * region) in a MAP_NORESERVE heap. --max-size still caps every request. */
static void test_largemem(driver_t *d) {
  const uint64_t gib = (uint64_t)1 << 30;
  int listed = 0, named = 0;
  for (const tracegen_pattern_t *p = tracegen_patterns(); p->name; p++)
    listed += !strcmp(p->name, "largemem");
  for (const tracegen_pattern_t *p = tracegen_named_only_patterns(); p->name; p++)
    named += !strcmp(p->name, "largemem");
  CHECK(listed == 0 && named == 1);

  size_t la, lb;
  char *a = gen("largemem", 7, 0, 0, &la), *b = gen("largemem", 7, 0, 0, &lb);
  if (!a || !b) return;
  CHECK(la == lb && memcmp(a, b, la) == 0);
  trace_t t;
  trace_error_t perr;
  CHECK(trace_parse_buffer("largemem", a, la, &t, &perr) == 0);
  CHECK(t.n_live_at_end == 0 && t.n_slots == t.num_ids);
  size_t huge = 0, first_huge = t.num_ops, grown_past_4g = 0, shrunk_after = 0;
  for (size_t i = 0; i < t.num_ops; i++) {
    const trace_op_t *op = &t.ops[i];
    if (op->kind == TRACE_OP_ALLOC && op->size >= 3 * gib) {
      huge++;
      if (first_huge == t.num_ops) first_huge = i;
    }
    if (op->kind == TRACE_OP_REALLOC && op->size > 4 * gib) grown_past_4g++;
    if (op->kind == TRACE_OP_REALLOC && op->size < 4096 && grown_past_4g) shrunk_after++;
  }
  CHECK(huge >= 6 && grown_past_4g == 1 && shrunk_after == 1);
  CHECK(first_huge >= 3 && first_huge < t.num_ops); /* small blocks first */
  CHECK(t.max_request <= 40 * gib && t.max_request >= 3 * gib);

  /* 256 GiB of address space; a machine that refuses it skips this part. */
  if (mem_init_cap((size_t)256 << 30) == 0) {
    driver_config_t cfg = {.align = 16, .check_every = 1, .check_only = true};
    driver_result_t r;
    CHECK(driver_run(d, lab_policy_default(), &t, &cfg, &r) == 0);
    if (!r.valid) fprintf(stderr, "%s\n", r.error);
  } else {
    printf("note: no 256 GiB heap reservation here; largemem replay left to lab.generated_largemem\n");
  }
  CHECK(mem_init_cap(0) == 0);
  trace_free(&t);
  free(a);
  free(b);

  size_t lm;
  char *m = gen("largemem", 7, 0, 1 << 20, &lm);
  CHECK(m && trace_parse_buffer("largemem", m, lm, &t, &perr) == 0);
  CHECK(t.max_request <= (1 << 20));
  trace_free(&t);
  free(m);
}

int main(void) {
  if (mem_init_cap(0) != 0) return 1;
  driver_t *d = driver_new();
  int n = 0;
  for (const tracegen_pattern_t *p = tracegen_patterns(); p->name; p++, n++) test_pattern(p->name, d);
  CHECK(n == 8);
  test_shapes();
  test_largemem(d);
  driver_free(d);
  mem_deinit();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("lab.tracegen: %d patterns, all checks passed\n", n);
  return 0;
}
