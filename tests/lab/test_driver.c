/* lab.driver: every check of the replay driver fires on a deliberately
 * broken fake policy, with the trace, line and op named, and a correct fake
 * policy passes; utilization, the out-of-memory case, the checker hooks
 * and the totals / perf index arithmetic are exact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "memlib.h"
#include "policy.h"

#include "check.h"

/* ---- fake policies over memlib ---------------------------------------------- */

/* The fault each fake policy injects. */
enum fault_e { F_NONE, F_MISALIGN, F_OUTSIDE, F_OVERLAP, F_CLOBBER, F_NOCOPY, F_NULL, F_CHECK, F_REPORT,
               F_REPORT_INIT, F_REPORT_TIMED };
static int inits;           /* F_REPORT_INIT / _TIMED: init calls since the fault was set */
static int report_fd = -1;  /* F_REPORT: where the crash context is written */
static enum fault_e fault;
static size_t fake_align;
static int calls;           /* malloc/realloc calls since init */
static int check_calls;
static char *last_block;

static size_t round_up(size_t n) { return (n + fake_align - 1) & ~(fake_align - 1); }

static int fake_init(size_t align) {
  inits++;
  if (fault == F_REPORT_INIT && inits == 1) driver_write_current_op(report_fd); /* as a crash in init would */
  fake_align = align;
  calls = 0;
  check_calls = 0;
  last_block = NULL;
  return 0;
}

/* A bump allocator with an 8-byte size header: correct unless a fault is set. */
static void *fake_malloc(size_t size) {
  if (size == 0) return NULL;
  calls++;
  if (fault == F_NULL && calls == 3) return NULL;
  if (fault == F_REPORT && calls == 3) driver_write_current_op(report_fd);  /* as a crash handler would */
  if (fault == F_REPORT_TIMED && inits == 2 && calls == 3) driver_write_current_op(report_fd); /* timed pass 1 */
  if (fault == F_OVERLAP && calls == 3) return last_block + 16;
  if (fault == F_OUTSIDE && calls == 3) {
    static _Alignas(16) char elsewhere[64];
    return elsewhere;
  }
  size_t head = fake_align;
  char *p = mem_sbrk((intptr_t)(head + round_up(size)));
  if (p == (void *)-1) return NULL;
  p += head;
  memcpy(p - 8, &size, sizeof size);
  if (fault == F_CLOBBER && calls == 3) last_block[1] ^= 0x55;  /* tramples id 1's payload */
  last_block = p;
  if (fault == F_MISALIGN && calls == 3) return p + 4;
  return p;
}

static void fake_free(void *p) { (void)p; }

static void *fake_realloc(void *p, size_t size) {
  if (size == 0) return NULL;
  char *n = fake_malloc(size);
  if (n && p && fault != F_NOCOPY) {
    size_t old;
    memcpy(&old, (char *)p - 8, sizeof old);
    memcpy(n, p, old < size ? old : size);
  }
  return n;
}

static int fake_check(char *err, size_t len) {
  check_calls++;
  if (fault == F_CHECK && calls >= 2) {
    snprintf(err, len, "fake invariant broken after %d blocks", calls);
    return -1;
  }
  return 0;
}

static const lab_policy_t fake = {
  .name = "fake", .description = "test double", .init = fake_init, .malloc = fake_malloc,
  .free = fake_free, .realloc = fake_realloc, .check = fake_check,
};

/* ---- helpers ---------------------------------------------------------------- */

static const char *const small_trace =
    "1000\n4\n8\n1\n"
    "a 0 40\n"     /* line 5, op 1 */
    "a 1 100\n"    /* line 6, op 2 */
    "a 2 16\n"     /* line 7, op 3 */
    "r 0 300\n"    /* line 8, op 4 */
    "f 1\n"        /* line 9, op 5 */
    "a 3 8\n"      /* line 10, op 6 */
    "f 0\n"        /* line 11, op 7 */
    "f 2\n";       /* line 12, op 8 */

static void load(trace_t *t, const char *text) {
  trace_error_t err;
  if (trace_parse_buffer("small.rep", text, strlen(text), t, &err) != 0) {
    fprintf(stderr, "test trace does not parse: %s\n", err.msg);
    exit(1);
  }
}

static void expect_fault(driver_t *d, enum fault_e f, size_t check_every, const char *prefix) {
  trace_t t;
  load(&t, small_trace);
  driver_config_t cfg = {.align = 16, .check_every = check_every, .check_only = true};
  driver_result_t r;
  fault = f;
  int rc = driver_run(d, &fake, &t, &cfg, &r);
  if (rc != 1 || r.valid || strncmp(r.error, prefix, strlen(prefix)) != 0) {
    fprintf(stderr, "fault %d: expected an error starting \"%s\"\n  got rc=%d \"%s\"\n", (int)f,
            prefix, rc, r.error);
    failures++;
  }
  fault = F_NONE;
  trace_free(&t);
}

/* ---- tests -------------------------------------------------------------------- */

static void test_correct_policy(driver_t *d) {
  trace_t t;
  load(&t, small_trace);
  driver_config_t cfg = {.align = 16, .check_every = 1, .check_only = false, .runs = 3};
  driver_result_t r;
  CHECK(driver_run(d, &fake, &t, &cfg, &r) == 0);
  CHECK(r.valid && r.has_util && r.timed && r.align == 16);
  CHECK(r.ops == 8);
  /* Heap: header+payload per allocation: (16+48) + (16+112) + (16+16) +
   * (16+304) + (16+16) = 576; peak live = 300 + 100 + 16 = 416. */
  CHECK(r.heap_bytes == 576);
  CHECK(r.util > 416.0 / 576 - 1e-12 && r.util < 416.0 / 576 + 1e-12);
  CHECK(r.secs >= 0);
  /* The checker ran after every op of the correctness pass; the last of
   * those is the run at the end. */
  fault = F_NONE;
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_every = 1, .check_only = true}, &r) == 0);
  CHECK(check_calls == 8 && r.checks == 8);
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_every = 3, .check_only = true}, &r) == 0);
  CHECK(check_calls == 3 && r.checks == 3);   /* after ops 3 and 6, and at the end */
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_only = true}, &r) == 0);
  CHECK(check_calls == 1);
  /* A budget of 2 checks stretches every op to every 4th (8 ops). */
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_every = 1, .check_budget = 2, .check_only = true}, &r) == 0);
  CHECK(check_calls == 2 && r.checks == 2);   /* after ops 4 and 8 (the end) */
  /* A budget of 5 on 8 ops: every 2nd op (8 / 5 rounded up), so never more
   * than 5 runs (rounded down it gave every op: 9 runs, end included). */
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_every = 1, .check_budget = 5, .check_only = true}, &r) == 0);
  CHECK(check_calls == 4 && r.checks == 4);   /* after ops 2, 4, 6 and 8 */
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_every = 1, .check_budget = 3, .check_only = true}, &r) == 0);
  CHECK(check_calls == 3 && r.checks == 3);   /* after ops 3 and 6, and at the end */
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_every = 1, .check_budget = 8, .check_only = true}, &r) == 0);
  CHECK(check_calls == 8 && r.checks == 8);   /* the budget allows every op */
  /* A budget only caps: without check_every the checker runs at the end only. */
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_budget = 5, .check_only = true}, &r) == 0);
  CHECK(check_calls == 1 && r.checks == 1);
  /* Alignment 8 is what the policy is given when asked. */
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 8, .check_only = true}, &r) == 0);
  CHECK(fake_align == 8 && r.align == 8);
  /* Default alignment follows the header: classic -> 8. */
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.check_only = true}, &r) == 0);
  CHECK(r.align == 8);
  trace_free(&t);

  /* The system allocator replays the same trace; no utilization for it. */
  load(&t, small_trace);
  CHECK(driver_run(d, driver_system_policy(), &t, &(driver_config_t){.runs = 1}, &r) == 0);
  CHECK(r.valid && !r.has_util && r.timed);
  trace_free(&t);
}

static void test_faults(driver_t *d) {
  expect_fault(d, F_MISALIGN, 0, "small.rep:7: op 3 (a 2 16): payload 0x");
  expect_fault(d, F_OUTSIDE, 0, "small.rep:7: op 3 (a 2 16): payload [0x");
  expect_fault(d, F_OVERLAP, 0, "small.rep:7: op 3 (a 2 16): payload [0x");
  expect_fault(d, F_CLOBBER, 0, "small.rep:9: op 5 (f 1): payload of id 1 was overwritten at offset 1 while live");
  expect_fault(d, F_NOCOPY, 0, "small.rep:8: op 4 (r 0 300): realloc from 40 bytes did not preserve the contents (first difference at offset 0)");
  expect_fault(d, F_NULL, 0, "small.rep:7: op 3 (a 2 16): returned NULL with ");
  expect_fault(d, F_CHECK, 1, "small.rep:6: op 2 (a 1 100): heap check failed after this op: fake invariant broken after 2 blocks");
  expect_fault(d, F_CHECK, 0, "small.rep: heap check failed at the end: fake invariant broken");

  /* The messages say what was wrong, not only where. */
  trace_t t;
  driver_result_t r;
  load(&t, small_trace);
  driver_config_t cfg = {.align = 16, .check_only = true};
  fault = F_MISALIGN;
  driver_run(d, &fake, &t, &cfg, &r);
  CHECK(strstr(r.error, "is not 16-byte aligned") != NULL);
  fault = F_OUTSIDE;
  driver_run(d, &fake, &t, &cfg, &r);
  CHECK(strstr(r.error, "lies outside the heap") != NULL);
  fault = F_OVERLAP;
  driver_run(d, &fake, &t, &cfg, &r);
  CHECK(strstr(r.error, "overlaps the live payload of id 1") != NULL);
  fault = F_NONE;
  trace_free(&t);
}

/* The crash context a signal handler prints names the op being replayed,
 * and nothing is written outside a correctness pass. */
static void test_crash_context(driver_t *d) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  report_fd = fds[1];
  trace_t t;
  load(&t, small_trace);
  driver_result_t r;
  fault = F_REPORT;
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_only = true}, &r) == 0);
  fault = F_NONE;
  CHECK(write(fds[1], "|", 1) == 1);
  driver_write_current_op(fds[1]);  /* outside a pass */
  CHECK(write(fds[1], "|", 1) == 1);
  /* A crash in the policy's init, and one in a timed pass (a student's init
   * that does not reset everything): the trace and the phase are named
   * (both used to print nothing after "while replaying"). */
  fault = F_REPORT_INIT;
  inits = 0;
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_only = true}, &r) == 0);
  CHECK(write(fds[1], "|", 1) == 1);
  fault = F_REPORT_TIMED;
  inits = 0;
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .runs = 1}, &r) == 0);
  fault = F_NONE;
  close(fds[1]);
  char buf[1024] = {0};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  static const char expected_head[] = "small.rep:7: op 3 (policy fake)|(outside any trace)|"
                                      "small.rep: in the policy's init (policy fake)|"
                                      "small.rep: timed pass 1 (its checked pass was valid";
  static const char expected_tail[] = ") (policy fake)";
  size_t len = strlen(buf);
  CHECK(n > 0 && !strncmp(buf, expected_head, sizeof expected_head - 1));
  CHECK(len > sizeof expected_tail && !strcmp(buf + len - (sizeof expected_tail - 1), expected_tail));
  trace_free(&t);
}

/* Replays trace_text on the fake policy (checked pass only): the run must
 * be invalid, out of memory, with exactly this error. */
static void expect_out_of_memory(driver_t *d, const char *trace_text, const char *error) {
  trace_t t;
  load(&t, trace_text);
  driver_result_t r;
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 8, .check_only = true}, &r) == 1);
  CHECK(r.out_of_memory && !r.valid);
  if (strcmp(r.error, error) != 0) {
    fprintf(stderr, "error was: %s\n", r.error);
    CHECK(!strcmp(r.error, error));
  }
  trace_free(&t);
}

static void test_out_of_memory(driver_t *d) {
  /* A 64 KiB heap holding 40000 bytes cannot hold 40000 more: legitimately
   * NULL, and reported as out of memory (the run is invalid). */
  CHECK(mem_init_cap(64 << 10) == 0);
  trace_t t;
  load(&t, "1000\n2\n3\n1\na 0 40000\na 1 40000\nf 0\n");
  driver_result_t r;
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 8, .check_only = true}, &r) == 1);
  CHECK(r.out_of_memory && !r.valid);
  CHECK(strstr(r.error, "small.rep:6: op 2 (a 1 40000): out of memory: the heap (") == r.error);
  trace_free(&t);
  /* A request just under the cap's remaining bytes, too close to hold its
   * header too: out of memory, not the policy's fault (it was reported as
   * "returned NULL with 65536 bytes of heap cap still free"). */
  expect_out_of_memory(d, "1000\n1\n1\n1\na 0 65530\n",
                       "small.rep:5: op 1 (a 0 65530): out of memory: 65536 bytes of the heap cap are left, "
                       "too few for 65530 bytes and the block's tags and alignment");
  /* More than the whole cap: refused up front, naming the request. */
  expect_out_of_memory(d, "1000\n2\n3\n1\na 0 1000\nr 0 100000\nf 0\n",
                       "small.rep:6: op 2 (r 0 100000): out of memory: a request of 100000 bytes is "
                       "larger than the whole heap cap of 65536 bytes (--heap-cap)");
  /* ... before a real policy grows its heap towards the cap in pieces: a
   * 5 GB request under a 4 GiB cap left the heap at 4294967200 bytes, and
   * the message quoted that heap. (Address space only: nothing is touched.) */
  if (mem_init_cap((size_t)4 << 30) == 0) {
    load(&t, "1\n1\n2\n1\na 0 5000000000\nf 0\n");
    CHECK(driver_run(d, lab_policy_default(), &t, &(driver_config_t){.check_only = true}, &r) == 1);
    CHECK(r.out_of_memory && strstr(r.error, "a request of 5000000000 bytes is larger than the whole heap cap"));
    CHECK(mem_heapsize() < ((size_t)1 << 20));
    trace_free(&t);
  }
  CHECK(mem_init_cap(0) == 0);
}

/* Many live blocks: the overlap check must still find an overlap between
 * two far-apart blocks (the treap is searched, not just a neighbour). */
static char *overlap_target;
static int overlap_at, overlap_calls;
static int overlap_init(size_t align) {
  overlap_calls = 0;
  return fake_init(align);
}
static void *overlap_malloc(size_t size) {
  overlap_calls++;
  if (overlap_calls == overlap_at) return overlap_target + 16;
  char *p = fake_malloc(size);
  if (overlap_calls == 100) overlap_target = p;
  return p;
}
static const lab_policy_t overlapper = {
  .name = "overlapper", .description = "test double", .init = overlap_init,
  .malloc = overlap_malloc, .free = fake_free, .realloc = fake_realloc, .check = NULL,
};

static void test_overlap_many(driver_t *d) {
  size_t n = 3000;
  char *text = malloc(64 + n * 24), *p = text;
  p += sprintf(p, "1000\n%zu\n%zu\n1\n", n, n);
  for (size_t i = 0; i < n; i++) p += sprintf(p, "a %zu %zu\n", i, 16 + (i * 37) % 200);
  trace_t t;
  load(&t, text);
  driver_result_t r;
  overlap_at = 0;
  CHECK(driver_run(d, &overlapper, &t, &(driver_config_t){.align = 16, .check_only = true}, &r) == 0);
  overlap_at = 2500;  /* block 2500 lands inside block 99 (the 100th call) */
  CHECK(driver_run(d, &overlapper, &t, &(driver_config_t){.align = 16, .check_only = true}, &r) == 1);
  CHECK(strstr(r.error, "small.rep:2504: op 2500 (a 2499 ") == r.error);
  CHECK(strstr(r.error, "overlaps the live payload of id 99 ") != NULL);
  trace_free(&t);
  free(text);
}

/* realloc(p, 0) may return a minimal block instead of NULL (C allows it):
 * the id is NULL for the trace (it may be allocated again), but the driver
 * held the block in its live set, and allocating the id again inserted
 * its treap node a second time: a cycle, and the next overlap search
 * looped for ever (a student's mm_realloc built on mm_malloc(0) did it). */
static void *zero_realloc(void *p, size_t size) {
  if (size == 0) return fake_malloc(1);
  return fake_realloc(p, size);
}
static const lab_policy_t zero_realloc_policy = {
  .name = "zero-realloc", .description = "test double", .init = fake_init, .malloc = fake_malloc,
  .free = fake_free, .realloc = zero_realloc, .check = NULL,
};

static void test_realloc_zero_block(driver_t *d) {
  trace_t t;
  load(&t, "1000\n3\n9\n1\na 0 8\nr 0 0\na 0 16\na 1 16\nf 0\na 2 24\nr 1 0\nf 1\nf 2\n");
  driver_result_t r;
  fault = F_NONE;
  alarm(20); /* the loop fails the test here, not at the CTest timeout */
  CHECK(driver_run(d, &zero_realloc_policy, &t, &(driver_config_t){.align = 16, .check_only = true}, &r) == 0);
  CHECK(r.valid);
  alarm(0);
  trace_free(&t);
}

/* Blocks larger than the full-fill limit are checked at both ends. */
static void test_large_block_contents(driver_t *d) {
  trace_t t;
  load(&t, "1000\n2\n4\n1\na 0 3000000\na 1 16\nr 0 3500000\nf 0\n");
  driver_result_t r;
  fault = F_NONE;
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_only = true}, &r) == 0);
  fault = F_NOCOPY;
  CHECK(driver_run(d, &fake, &t, &(driver_config_t){.align = 16, .check_only = true}, &r) == 1);
  CHECK(strstr(r.error, "realloc from 3000000 bytes did not preserve the contents") != NULL);
  fault = F_NONE;
  trace_free(&t);
}

static void test_totals(void) {
  driver_result_t r[3];
  memset(r, 0, sizeof r);
  for (int i = 0; i < 3; i++) {
    r[i].valid = r[i].has_util = r[i].timed = r[i].scored_util = r[i].scored_thru = true;
  }
  r[0].util = 0.9, r[0].ops = 1000, r[0].secs = 0.001;
  r[1].util = 0.6, r[1].ops = 3000, r[1].secs = 0.002;
  r[2].util = 0.3, r[2].ops = 2000, r[2].secs = 0.003;
  driver_totals_t t;
  driver_totals(r, 3, 2000, &t);  /* 6000 ops / 0.006 s = 1000 Kops/s */
  CHECK(t.all_valid && t.has_util && t.has_thru && t.has_index);
  CHECK(t.ops == 6000);
  CHECK(t.kops > 999.999 && t.kops < 1000.001);
  CHECK(t.util > 0.6 - 1e-12 && t.util < 0.6 + 1e-12);
  CHECK(t.perf_index > 56 - 1e-9 && t.perf_index < 56 + 1e-9);  /* 100 (0.36 + 0.2) */
  driver_totals(r, 3, 500, &t);   /* throughput credit capped at 1 */
  CHECK(t.perf_index > 76 - 1e-9 && t.perf_index < 76 + 1e-9);
  driver_totals(r, 3, 0, &t);     /* no reference: no index */
  CHECK(!t.has_index);
  /* Weights: a utilization-only trace does not count for throughput, a
   * correctness-only one for neither. */
  r[1].scored_thru = false;
  r[2].scored_util = r[2].scored_thru = false;
  driver_totals(r, 3, 500, &t);
  CHECK(t.ops == 1000 && t.util > 0.75 - 1e-12 && t.util < 0.75 + 1e-12);
  /* Any invalid trace: index 0. */
  r[2].valid = false;
  driver_totals(r, 3, 500, &t);
  CHECK(!t.all_valid && t.has_index && t.perf_index == 0);
}

int main(void) {
  if (mem_init_cap(0) != 0) return 1;
  driver_t *d = driver_new();
  test_correct_policy(d);
  test_faults(d);
  test_crash_context(d);
  test_out_of_memory(d);
  test_overlap_many(d);
  test_large_block_contents(d);
  test_realloc_zero_block(d);
  test_totals();
  driver_free(d);
  mem_deinit();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("lab.driver: all checks passed\n");
  return 0;
}
