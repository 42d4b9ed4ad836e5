/* lab.tracegen: the generator is deterministic (same seed, same bytes;
 * another seed, other bytes), every pattern gives a balanced trace that
 * parses, honours --ops and --max-size, shows the shape it is named for,
 * and replays validly on the system allocator and on the default policy. */
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

int main(void) {
  if (mem_init_cap(0) != 0) return 1;
  driver_t *d = driver_new();
  int n = 0;
  for (const tracegen_pattern_t *p = tracegen_patterns(); p->name; p++, n++) test_pattern(p->name, d);
  CHECK(n == 8);
  test_shapes();
  driver_free(d);
  mem_deinit();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("lab.tracegen: %d patterns, all checks passed\n", n);
  return 0;
}
