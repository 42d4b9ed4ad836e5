/* lab.trace: the trace reader on in-memory buffers. Covers the three header
 * variants, CRLF and trailing blanks, free(NULL) forms, realloc(NULL, n) and
 * realloc(p, 0), unbalanced traces, stray lines, 64-bit sizes, every broken
 * case with its exact `name:line: message`, the writer round trip, and a
 * mutation fuzz run (no crash, and every failure names the buffer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#include "check.h"

static int parse(const char *text, trace_t *t, trace_error_t *err) {
  return trace_parse_buffer("t.rep", text, strlen(text), t, err);
}

static void expect_error(const char *text, const char *message) {
  trace_t t;
  trace_error_t err;
  int rc = parse(text, &t, &err);
  if (rc != -1 || strcmp(err.msg, message) != 0) {
    fprintf(stderr, "expected error \"%s\"\n     got rc=%d \"%s\"\n", message, rc, err.msg);
    failures++;
  }
  CHECK(t.ops == NULL && t.num_ops == 0);
  trace_free(&t);
}

static void test_classic(void) {
  trace_t t;
  trace_error_t err;
  const char *text = "20000\n4\n6\n1\na 0 24\na 1 100\nr 0 48\nf 1\nf 0\na 3 7\n";
  CHECK(parse(text, &t, &err) == 0);
  CHECK(t.format == TRACE_FORMAT_CLASSIC);
  CHECK(t.weight == 1);
  CHECK(t.num_ops == 6 && t.num_ids == 4);
  CHECK(t.header[0] == 20000 && t.header[3] == 1);
  CHECK(t.n_alloc == 3 && t.n_free == 2 && t.n_realloc == 1);
  CHECK(t.peak_live == 148);   /* 48 + 100 after the realloc */
  CHECK(t.max_request == 100);
  CHECK(t.n_live_at_end == 1); /* id 3 is never freed */
  CHECK(t.n_slots == 3);
  CHECK(t.ops[2].kind == TRACE_OP_REALLOC && t.ops[2].size == 48 && t.ops[2].line == 7);
  CHECK(t.ops[0].slot == t.ops[2].slot && t.ops[0].slot == t.ops[4].slot);
  CHECK(t.slot_ids[t.ops[5].slot] == 3);
  CHECK(!strcmp(trace_basename(&t), "t.rep"));
  trace_free(&t);
}

static void test_cmu64_crlf(void) {
  trace_t t;
  trace_error_t err;
  const char *text = "0\r\n2\r\n4\r\n38654727413 \r\na 0 38654727413\r\na 1 1 \r\nf 0\r\nf 1\r\n";
  CHECK(parse(text, &t, &err) == 0);
  CHECK(t.format == TRACE_FORMAT_CMU64);
  CHECK(t.weight == 0);
  CHECK(t.ops[0].size == 38654727413ull);  /* 64-bit sizes */
  CHECK(t.peak_live == 38654727414ull);
  CHECK(t.ops[1].size == 1 && t.ops[1].line == 6);
  CHECK(t.n_live_at_end == 0);
  trace_free(&t);
}

static void test_weighted_realworld(void) {
  trace_t t;
  trace_error_t err;
  /* weight 3, flag 1; free(NULL) three ways; realloc(NULL, n); realloc(p, 0)
   * then reuse of the id; blank lines; stray lines after num_ops. */
  const char *text =
      "3\n5\n9\n1\n"
      "f 4\n"       /* never allocated: free(NULL) */
      "f -1\n"      /* negative id: free(NULL) */
      "\n"
      "r 1 32\n"    /* realloc(NULL, 32) */
      "a 0 64\n"
      "r 0 0\n"     /* frees, id 0 holds NULL */
      "f 0\n"       /* free(NULL) */
      "a 0 10\t\n"  /* reused after realloc(p, 0) */
      "f 1\n"
      "a 2 5\n"
      "garbage after the requests\n\nf 99 x\n";
  CHECK(parse(text, &t, &err) == 0);
  CHECK(t.format == TRACE_FORMAT_WEIGHTED);
  CHECK(t.weight == 3);
  CHECK(t.num_ops == 9);
  CHECK(t.n_free_null == 3);
  CHECK(t.n_realloc_null == 1);
  CHECK(t.n_realloc_zero == 1);
  CHECK(t.peak_live == 96);
  CHECK(t.n_live_at_end == 2);  /* ids 0 and 2 */
  CHECK(t.stray_lines == 2 && t.first_stray_line == 15);
  trace_free(&t);
}

static void test_broken(void) {
  expect_error("", "t.rep:1: empty trace (expected 4 header lines)");
  expect_error("\n\n", "t.rep:2: empty trace (expected 4 header lines)");
  expect_error("1\n2\n", "t.rep:2: file ends inside the header (2 of 4 header lines)");
  expect_error("1\nx\n2\n1\n", "t.rep:2: header line 2 (num_ids): expected a number, got 'x'");
  expect_error("1\n2 3\n2\n1\n",
               "t.rep:2: header line 2 (num_ids): expected one number, got more text ('3')");
  expect_error("1\n2\n-2\n1\n", "t.rep:3: header line 3 (num_ops): negative value -2");
  expect_error("18446744073709551616\n2\n2\n1\n",
               "t.rep:1: header line 1 (heap size or weight): 18446744073709551616 does not fit in 64 bits");
  expect_error("100\n2\n3\n1\na 0 8\nf 0\n",
               "t.rep:7: file ends after 2 of the 3 requests announced in the header");
  expect_error("100\n2\n1\n1\nq 0 8\n", "t.rep:5: unknown request 'q' (expected a, f or r)");
  expect_error("100\n2\n1\n1\nalloc 0 8\n", "t.rep:5: unknown request 'alloc' (expected a, f or r)");
  expect_error("100\n2\n1\n1\na 0 -8\n", "t.rep:5: negative size -8");
  expect_error("100\n2\n1\n1\na 0 8x\n", "t.rep:5: size '8x' is not a number");
  expect_error("100\n2\n1\n1\na 0 18446744073709551616\n",
               "t.rep:5: size 18446744073709551616 does not fit in 64 bits");
  expect_error("100\n2\n1\n1\na 0 281474976710657\n",
               "t.rep:5: size 281474976710657 is larger than any heap (limit 2^48 bytes)");
  expect_error("100\n2\n1\n1\na 2 8\n", "t.rep:5: id 2 out of range (num_ids is 2)");
  expect_error("100\n2\n1\n1\nf 2\n", "t.rep:5: id 2 out of range (num_ids is 2)");
  expect_error("100\n2\n1\n1\na x 8\n", "t.rep:5: id 'x' is not a number");
  expect_error("100\n2\n1\n1\nf 99999999999999999999\n",
               "t.rep:5: id 99999999999999999999 does not fit in 64 bits");
  expect_error("100\n2\n1\n1\nr -1 8\n",
               "t.rep:5: negative id -1 in an 'r' request (only 'f' may name one: free(NULL))");
  expect_error("100\n2\n1\n1\na\n", "t.rep:5: 'a' request without an id");
  expect_error("100\n2\n1\n1\nr 0\n", "t.rep:5: 'r' request without a size");
  expect_error("100\n2\n1\n1\nf 0 0\n", "t.rep:5: unexpected text after the 'f' request: '0'");
  expect_error("100\n2\n1\n1\na 0 1 2 3 4 5\n", "t.rep:5: unexpected text after the 'a' request: '2'");
  expect_error("100\n2\n2\n1\na 0 8\na 0 8\n",
               "t.rep:6: id 0 allocated again while live (allocated at line 5)");
  expect_error("100\n2\n3\n1\na 0 8\nf 0\nf 0\n", "t.rep:7: id 0 freed twice (first freed at line 6)");
  expect_error("100\n2\n3\n1\na 0 8\nf 0\nr 0 9\n",
               "t.rep:7: realloc of id 0 after it was freed (at line 6)");
  expect_error("100\n2\n1\n1\na 0 8\001\n", "t.rep:5: unexpected byte 0x01 in column 6");
  /* A NUL byte inside the buffer is data, not the end of the string. */
  trace_t t;
  trace_error_t err;
  static const char nul[] = "100\n2\n1\n1\na 0\0 8\n";
  CHECK(trace_parse_buffer("t.rep", nul, sizeof nul - 1, &t, &err) == -1);
  CHECK(!strcmp(err.msg, "t.rep:5: unexpected byte 0x00 in column 4"));
  /* The live payload must stay representable. */
  char big[512];
  snprintf(big, sizeof big, "100\n70000\n%d\n1\n", 65537);
  size_t len = strlen(big);
  char *buf = malloc(len + 65537 * 24);
  memcpy(buf, big, len);
  for (int i = 0; i < 65537; i++) len += (size_t)sprintf(buf + len, "a %d 281474976710656\n", i);
  CHECK(trace_parse_buffer("t.rep", buf, len, &t, &err) == -1);
  CHECK(!strcmp(err.msg, "t.rep:65540: total live payload exceeds 2^64 bytes"));
  free(buf);
  /* A huge num_ops or num_ids costs nothing: memory follows the file. */
  CHECK(parse("1\n18446744073709551615\n18446744073709551615\n1\na 123456789012 5\n", &t, &err) == -1);
  CHECK(!strcmp(err.msg, "t.rep:6: file ends after 1 of the 18446744073709551615 requests announced in the header"));
}

static void test_write_roundtrip(void) {
  trace_t t, u;
  trace_error_t err;
  const char *text = "2\n9\n7\n1\na 5 10\na 8 20\nr 5 30\nf -1\nf 8\nf 5\nf 3\n";
  CHECK(parse(text, &t, &err) == 0);
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  CHECK(trace_write(&t, f) == 0);
  fclose(f);
  /* Dense ids in order of first use; the classic header; same requests. */
  CHECK(!strcmp(out, "50\n4\n7\n1\na 0 10\na 1 20\nr 0 30\nf -1\nf 1\nf 0\nf 3\n"));
  CHECK(trace_parse_buffer("u.rep", out, len, &u, &err) == 0);
  CHECK(u.format == TRACE_FORMAT_CLASSIC && u.num_ops == t.num_ops && u.peak_live == t.peak_live);
  free(out);
  trace_free(&t);
  trace_free(&u);
}

/* Mutations of a valid trace: every outcome is either a parse or an error
 * naming the buffer and a line; nothing crashes (run under ASan in CI). */
static void test_mutations(void) {
  const char *seed = "3\n4\n8\n120\r\na 0 24\na 1 96\nr 0 48\nf 1\nf -1\na 2 0\nr 2 8\nf 0\n";
  size_t n = strlen(seed);
  char buf[256];
  uint64_t x = 88172645463325252ull;
  int parsed = 0, rejected = 0;
  for (int round = 0; round < 20000; round++) {
    memcpy(buf, seed, n);
    size_t len = n;
    int edits = 1 + round % 4;
    for (int e = 0; e < edits; e++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t pos = (size_t)(x % len);
      switch ((x >> 32) % 4) {
      case 0: buf[pos] = (char)(x >> 40); break;                       /* any byte */
      case 1: buf[pos] = "0123456789 \n-arf\r"[(x >> 40) % 17]; break; /* plausible byte */
      case 2: len = pos; break;                                          /* truncate */
      case 3: if (len < sizeof buf - 1) { memmove(buf + pos + 1, buf + pos, len - pos); buf[pos] = '9'; len++; } break;
      }
      if (len == 0) break;
    }
    trace_t t;
    trace_error_t err;
    if (trace_parse_buffer("m.rep", buf, len, &t, &err) == 0) {
      parsed++;
      CHECK(t.num_ops == t.header[2]);
      for (size_t i = 0; i < t.num_ops; i++) CHECK(t.ops[i].slot < t.n_slots);
      trace_free(&t);
    } else {
      rejected++;
      CHECK(!strncmp(err.msg, "m.rep:", 6) && err.line > 0);
    }
  }
  CHECK(parsed > 100 && rejected > 100);
}

/* A line 1 of 0-3 with a 0/1 line 4 is a weighted header or a classic one
 * whose (ignored) heap size is 0-3: read as weighted but flagged, and the
 * format can be given. Before, a classic "0 2 4 1" became weight 0 (never
 * scored) at 16-byte alignment, silently and with no way to say otherwise. */
static void test_header_choice(void) {
  const char *text = "0\n2\n4\n1\na 0 8\na 1 8\nf 0\nf 1\n";
  trace_t t;
  trace_error_t err;
  CHECK(parse(text, &t, &err) == 0);
  CHECK(t.format == TRACE_FORMAT_WEIGHTED && t.weight == 0 && t.header_guessed);
  trace_free(&t);
  CHECK(trace_parse_buffer_as("t.rep", text, strlen(text), TRACE_FORMAT_CLASSIC, &t, &err) == 0);
  CHECK(t.format == TRACE_FORMAT_CLASSIC && t.weight == 1 && !t.header_guessed);
  trace_free(&t);
  /* The peak on line 4 is CMU 64-bit, no guess; a line 1 above 3 classic. */
  text = "2\n2\n4\n16\na 0 8\na 1 8\nf 0\nf 1\n";
  CHECK(parse(text, &t, &err) == 0);
  CHECK(t.format == TRACE_FORMAT_CMU64 && t.weight == 2 && !t.header_guessed);
  trace_free(&t);
  text = "4\n2\n4\n1\na 0 8\na 1 8\nf 0\nf 1\n";
  CHECK(parse(text, &t, &err) == 0);
  CHECK(t.format == TRACE_FORMAT_CLASSIC && t.weight == 1 && !t.header_guessed);
  trace_free(&t);
  /* A given format still checks its values, at the line that is wrong. */
  CHECK(trace_parse_buffer_as("t.rep", text, strlen(text), TRACE_FORMAT_CMU64, &t, &err) == -1);
  CHECK(!strcmp(err.msg, "t.rep:1: header line 1 (weight): 4 is not a weight (0-3) of a cmu64 header"));
  text = "\n3\n2\n4\n\n7\na 0 8\na 1 8\nf 0\nf 1\n";
  CHECK(trace_parse_buffer_as("t.rep", text, strlen(text), TRACE_FORMAT_WEIGHTED, &t, &err) == -1);
  CHECK(!strcmp(err.msg, "t.rep:6: header line 4 (flag): 7 is not 0 or 1 (weighted header)"));
  CHECK(trace_parse_buffer_as("t.rep", text, strlen(text), TRACE_FORMAT_CMU64, &t, &err) == 0);
  CHECK(t.format == TRACE_FORMAT_CMU64 && t.weight == 3);
  trace_free(&t);
  CHECK(trace_parse_buffer_as("t.rep", text, strlen(text), 7, &t, &err) == -1);
}

int main(void) {
  test_classic();
  test_header_choice();
  test_cmu64_crlf();
  test_weighted_realworld();
  test_broken();
  test_write_roundtrip();
  test_mutations();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("lab.trace: all checks passed\n");
  return 0;
}
