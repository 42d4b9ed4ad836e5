/* fuzz_trace.c — libFuzzer harness for the lab's trace parser
 * (lab/trace.h, trace_parse_buffer).
 *
 * The parser must never read outside the buffer (ASan watches: the input is
 * copied into an exact-size allocation, no terminating NUL), must either
 * accept the input or reject it with a "name:line: what" message, and what
 * it accepts must satisfy the invariants its header promises: num_ops ops,
 * each slot below n_slots, kinds a/f/r, lines within the input. An accepted
 * trace is also written back with trace_write and parsed again: the second
 * parse must succeed and give the same requests (kinds, sizes and the same
 * slot structure). Violations abort, which libFuzzer reports as a crash.
 * Built by tests/fuzz/CMakeLists.txt in the clang sub-build. */
#define _GNU_SOURCE
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                   \
  do {                                              \
    fprintf(stderr, "fuzz_trace: " __VA_ARGS__);    \
    fputc('\n', stderr);                            \
    abort();                                        \
  } while (0)

static size_t count_lines(const char *buf, size_t len) {
  size_t lines = 1;
  for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
  return lines;
}

static void check_invariants(const trace_t *t, size_t max_line) {
  if (t->num_ops && !t->ops) FAIL("num_ops %zu but no ops", t->num_ops);
  size_t allocs = 0, frees = 0, reallocs = 0;
  for (size_t i = 0; i < t->num_ops; i++) {
    const trace_op_t *op = &t->ops[i];
    if (op->slot >= t->n_slots) FAIL("op %zu: slot %u >= n_slots %zu", i, op->slot, t->n_slots);
    if (op->line == 0 || op->line > max_line) FAIL("op %zu: line %u outside 1..%zu", i, op->line, max_line);
    if (i > 0 && op->line <= t->ops[i - 1].line) FAIL("op %zu: lines not increasing", i);
    switch (op->kind) {
      case TRACE_OP_ALLOC: allocs++; break;
      case TRACE_OP_FREE: frees++; if (op->size) FAIL("op %zu: free with size", i); break;
      case TRACE_OP_REALLOC: reallocs++; break;
      default: FAIL("op %zu: kind %d", i, op->kind);
    }
    if (op->size > t->max_request) FAIL("op %zu: size above max_request", i);
  }
  if (allocs != t->n_alloc || frees != t->n_free || reallocs != t->n_realloc)
    FAIL("counts a/f/r %zu/%zu/%zu differ from the trace's %zu/%zu/%zu", allocs, frees,
         reallocs, t->n_alloc, t->n_free, t->n_realloc);
  if (t->weight < 0 || t->weight > 3) FAIL("weight %d", t->weight);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  char *buf = malloc(len ? len : 1); /* exact size: no NUL for the parser to lean on */
  if (!buf) return 0;
  memcpy(buf, data, len);
  trace_t t;
  trace_error_t err;
  memset(&err, 0, sizeof err);
  int rc = trace_parse_buffer("fuzz.rep", buf, len, &t, &err);
  if (rc != 0) {
    if (rc != -1) FAIL("trace_parse_buffer returned %d", rc);
    if (memchr(err.msg, '\0', sizeof err.msg) == NULL) FAIL("error message not terminated");
    if (strncmp(err.msg, "fuzz.rep", 8) != 0) FAIL("error does not name the input: %s", err.msg);
    /* An error at end of input may name the line after the last one. */
    if (err.line > count_lines(buf, len) + 1) FAIL("error line %u beyond the input: %s", err.line, err.msg);
    free(buf);
    return 0;
  }
  check_invariants(&t, count_lines(buf, len));

  /* Round trip: what we accepted, written back, parses to the same requests. */
  char *text = NULL;
  size_t text_len = 0;
  FILE *out = open_memstream(&text, &text_len);
  if (!out) FAIL("open_memstream");
  if (trace_write(&t, out) != 0) FAIL("trace_write failed on an accepted trace");
  fclose(out);
  trace_t again;
  trace_error_t err2;
  if (trace_parse_buffer("roundtrip.rep", text, text_len, &again, &err2) != 0)
    FAIL("re-parse of written trace failed: %s", err2.msg);
  if (again.num_ops != t.num_ops) FAIL("round trip: %zu ops, was %zu", again.num_ops, t.num_ops);
  for (size_t i = 0; i < t.num_ops; i++) {
    const trace_op_t *a = &t.ops[i], *b = &again.ops[i];
    if (a->kind != b->kind || a->size != b->size || a->slot != b->slot)
      FAIL("round trip: op %zu was %c slot %u size %llu, now %c slot %u size %llu", i, a->kind,
           a->slot, (unsigned long long)a->size, b->kind, b->slot, (unsigned long long)b->size);
  }
  trace_free(&again);
  free(text);
  trace_free(&t);
  free(buf);
  return 0;
}
