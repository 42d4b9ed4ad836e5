/* trace: malloc-lab trace reader and writer (contract in trace.h).
 *
 * The parser works on a length-delimited buffer, one line at a time, and
 * never trusts a number from the file to size an allocation: the op array is
 * bounded by what the buffer can hold (a request line takes at least 4
 * bytes), and ids are renumbered into dense slots through an open-addressing
 * table sized from that same bound. Every allocation happens before the
 * request loop, so parsing costs O(file size) time and memory. */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Largest request size accepted: far above any simulated heap, yet small
 * enough that `size + header` arithmetic in a policy cannot wrap. */
#define TRACE_MAX_SIZE ((uint64_t)1 << 48)
#define TRACE_MAX_TOKENS 4

typedef enum slot_state_e {
  SLOT_NULL = 0,  /* holds NULL: never allocated, or after realloc(p, 0) */
  SLOT_LIVE,      /* holds a block (possibly a malloc(0) result) */
  SLOT_FREED,     /* holds a dangling pointer: any further f/r is a bug */
} slot_state_t;

typedef struct parser_s {
  const char *name;
  const char *buf;
  size_t len;
  size_t pos;
  uint32_t line;           /* number of the current line */
  trace_error_t *err;
  /* current line, blanks stripped */
  const char *tok[TRACE_MAX_TOKENS];
  size_t tok_len[TRACE_MAX_TOKENS];
  int ntok;
  bool too_many_tokens;
} parser_t;

static int fail(parser_t *p, uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(parser_t *p, uint32_t line, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(p->err->msg, sizeof p->err->msg, "%s:%u: %s", p->name, line, what);
  p->err->line = line;
  return -1;
}

/* Copy a token into a printable, bounded string for messages. */
static const char *show(const char *tok, size_t len, char *out, size_t outlen) {
  size_t n = len < outlen - 4 ? len : outlen - 4;
  memcpy(out, tok, n);
  out[n] = '\0';
  if (n < len) strcat(out, "...");
  return out;
}

/* Split the next line into tokens. Returns 0 at end of buffer, 1 with a
 * line (possibly blank: ntok == 0), -1 on a byte no trace contains. */
static int next_line(parser_t *p) {
  if (p->pos >= p->len) return 0;
  p->line++;
  const char *s = p->buf + p->pos;
  size_t rest = p->len - p->pos;
  const char *nl = memchr(s, '\n', rest);
  size_t n = nl ? (size_t)(nl - s) : rest;
  p->pos += nl ? n + 1 : n;
  if (n > 0 && s[n - 1] == '\r') n--;  /* CRLF */
  p->ntok = 0;
  p->too_many_tokens = false;
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    if (c == ' ' || c == '\t') { i++; continue; }
    size_t start = i;
    while (i < n) {
      c = (unsigned char)s[i];
      if (c == ' ' || c == '\t') break;
      if (c < 0x20 || c >= 0x7f)
        return fail(p, p->line, "unexpected byte 0x%02x in column %zu", c, i + 1);
      i++;
    }
    if (p->ntok == TRACE_MAX_TOKENS) { p->too_many_tokens = true; continue; }
    p->tok[p->ntok] = s + start;
    p->tok_len[p->ntok] = i - start;
    p->ntok++;
  }
  return 1;
}

typedef enum num_status_e { NUM_OK, NUM_NEGATIVE, NUM_OVERFLOW, NUM_GARBAGE } num_status_t;

/* Decimal integer with an optional leading '-'; value in *mag (magnitude). */
static num_status_t parse_number(const char *tok, size_t len, uint64_t *mag, bool *negative) {
  size_t i = 0;
  *negative = false;
  if (len > 0 && (tok[0] == '-' || tok[0] == '+')) {
    *negative = tok[0] == '-';
    i = 1;
  }
  if (i == len) return NUM_GARBAGE;
  uint64_t v = 0;
  bool overflow = false;
  for (; i < len; i++) {
    if (tok[i] < '0' || tok[i] > '9') return NUM_GARBAGE;
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(tok[i] - '0'), &v))
      overflow = true;
  }
  *mag = v;
  if (overflow) return NUM_OVERFLOW;
  return *negative && v != 0 ? NUM_NEGATIVE : NUM_OK;
}

static const char *const header_names[4] = {
  "line 1 (heap size or weight)", "line 2 (num_ids)", "line 3 (num_ops)",
  "line 4 (weight, peak payload or flag)",
};

static int parse_header(parser_t *p, uint64_t header[4], uint32_t lines[4]) {
  int have = 0;
  while (have < 4) {
    int r = next_line(p);
    if (r < 0) return -1;
    if (r == 0) {
      if (have == 0) return fail(p, p->line ? p->line : 1, "empty trace (expected 4 header lines)");
      return fail(p, p->line, "file ends inside the header (%d of 4 header lines)", have);
    }
    if (p->ntok == 0) continue;
    char shown[48];
    if (p->ntok > 1 || p->too_many_tokens)
      return fail(p, p->line, "header %s: expected one number, got more text ('%s')",
                  header_names[have], show(p->tok[1], p->tok_len[1], shown, sizeof shown));
    bool neg;
    switch (parse_number(p->tok[0], p->tok_len[0], &header[have], &neg)) {
    case NUM_OK: break;
    case NUM_NEGATIVE:
      return fail(p, p->line, "header %s: negative value %s", header_names[have],
                  show(p->tok[0], p->tok_len[0], shown, sizeof shown));
    case NUM_OVERFLOW:
      return fail(p, p->line, "header %s: %s does not fit in 64 bits", header_names[have],
                  show(p->tok[0], p->tok_len[0], shown, sizeof shown));
    case NUM_GARBAGE:
      return fail(p, p->line, "header %s: expected a number, got '%s'", header_names[have],
                  show(p->tok[0], p->tok_len[0], shown, sizeof shown));
    }
    lines[have] = p->line;
    have++;
  }
  return 0;
}

/* Which header the four numbers are. The three layouts cannot be told
 * apart by their shape (four integers each), only by their values:
 *   classic   heap size (any), num_ids, num_ops, weight (ignored, always 1)
 *   cmu64     weight 0-3,      num_ids, num_ops, peak live payload
 *   weighted  weight 0-3,      num_ids, num_ops, 0/1 flag
 * A line 1 above 3 is no weight: classic. Below, line 4 decides: the
 * trace's own peak is CMU 64-bit (which states it); any other value above
 * 1 is CMU 64-bit too (its driver reads line 4 without checking it, and no
 * classic header has a weight there other than 1). That leaves a line 4 of
 * 0 or 1 that is not the peak: the weighted driver's flag (what the
 * weighted traces in circulation look like: their short1.rep starts
 * 1 6 12 1), but also exactly a classic header whose ignored heap size is
 * 0-3. Until 2026-11-23 that case was read as weighted silently, so such a
 * classic trace became a weight-0 (never scored), utilization-only or
 * throughput-only trace replayed at 16-byte alignment, and nothing said so
 * or could change it. It is still read as weighted (the weighted variant
 * needs it), but t->header_guessed tells the caller to say so, and the
 * format can be given (want, `tessera lab --format`); a forced weighted
 * format checks its values (weight 0-3, flag 0/1) with file:line errors. */
static int decide_format(parser_t *p, const uint64_t h[4], const uint32_t lines[4], int want,
                         trace_t *t) {
  bool weight_ok = h[0] <= 3;
  if (want == TRACE_FORMAT_AUTO) {
    if (!weight_ok) want = TRACE_FORMAT_CLASSIC;
    else if (h[3] == t->peak_live) want = TRACE_FORMAT_CMU64;
    else if (h[3] <= 1) {
      want = TRACE_FORMAT_WEIGHTED;
      t->header_guessed = true;
    } else {
      want = TRACE_FORMAT_CMU64;
    }
  } else if (want != TRACE_FORMAT_CLASSIC) {
    if (!weight_ok)
      return fail(p, lines[0], "header line 1 (weight): %llu is not a weight (0-3) of a %s header",
                  (unsigned long long)h[0], trace_format_name((trace_format_t)want));
    if (want == TRACE_FORMAT_WEIGHTED && h[3] > 1)
      return fail(p, lines[3], "header line 4 (flag): %llu is not 0 or 1 (weighted header)",
                  (unsigned long long)h[3]);
  }
  t->format = (trace_format_t)want;
  t->weight = want == TRACE_FORMAT_CLASSIC ? 1 : (int)h[0];
  return 0;
}

/* Open-addressing map from id (as written) to dense slot. */
typedef struct id_map_s {
  int64_t *keys;
  uint32_t *slots;   /* UINT32_MAX = empty */
  size_t mask;
} id_map_t;

static uint64_t hash_id(int64_t id) {
  uint64_t x = (uint64_t)id * 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 29);
}

void trace_free(trace_t *t) {
  if (!t) return;
  free(t->name);
  free(t->ops);
  free(t->slot_ids);
  memset(t, 0, sizeof *t);
}

int trace_parse_buffer(const char *name, const char *buf, size_t len, trace_t *t,
                       trace_error_t *err) {
  return trace_parse_buffer_as(name, buf, len, TRACE_FORMAT_AUTO, t, err);
}

int trace_parse_buffer_as(const char *name, const char *buf, size_t len, int format, trace_t *t,
                          trace_error_t *err) {
  memset(t, 0, sizeof *t);
  memset(err, 0, sizeof *err);
  if (!name) name = "<buffer>";
  parser_t p = {.name = name, .buf = buf, .len = buf ? len : 0, .err = err};
  uint64_t header[4];
  uint32_t header_lines[4];
  if (format != TRACE_FORMAT_AUTO && format != TRACE_FORMAT_CLASSIC &&
      format != TRACE_FORMAT_CMU64 && format != TRACE_FORMAT_WEIGHTED) {
    snprintf(err->msg, sizeof err->msg, "%s: unknown header format %d", name, format);
    return -1;
  }
  if (parse_header(&p, header, header_lines) < 0) return -1;
  uint64_t num_ids = header[1], num_ops = header[2];

  /* Each request line takes at least 4 bytes ("f 0\n"), so the buffer
   * bounds how many requests (and distinct ids) it can hold. */
  size_t bound = (p.len - p.pos) / 4 + 1;
  size_t cap = num_ops < bound ? (size_t)num_ops : bound;
  size_t map_size = 16;
  while (map_size < 2 * cap + 2) map_size <<= 1;

  t->ops = malloc((cap ? cap : 1) * sizeof *t->ops);
  t->slot_ids = malloc((cap ? cap : 1) * sizeof *t->slot_ids);
  id_map_t map = {
    .keys = malloc(map_size * sizeof *map.keys),
    .slots = malloc(map_size * sizeof *map.slots),
    .mask = map_size - 1,
  };
  uint8_t *state = calloc(cap ? cap : 1, 1);
  uint32_t *last_line = calloc(cap ? cap : 1, sizeof *last_line);
  uint64_t *cur_size = calloc(cap ? cap : 1, sizeof *cur_size);
  t->name = strdup(name);
  int rc = -1;
  if (!t->ops || !t->slot_ids || !map.keys || !map.slots || !state || !last_line ||
      !cur_size || !t->name) {
    fail(&p, p.line, "out of memory reading the trace");
    goto done;
  }
  memset(map.slots, 0xff, map_size * sizeof *map.slots);

  uint64_t live = 0;
  size_t nops = 0;
  char shown[48];
  while (nops < num_ops) {
    int r = next_line(&p);
    if (r < 0) goto done;
    if (r == 0) {
      fail(&p, p.line + 1, "file ends after %zu of the %llu requests announced in the header",
           nops, (unsigned long long)num_ops);
      goto done;
    }
    if (p.ntok == 0) continue;
    const char *op = p.tok[0];
    if (p.tok_len[0] != 1 || (op[0] != 'a' && op[0] != 'f' && op[0] != 'r')) {
      fail(&p, p.line, "unknown request '%s' (expected a, f or r)",
           show(op, p.tok_len[0], shown, sizeof shown));
      goto done;
    }
    char kind = op[0];
    int want = kind == 'f' ? 2 : 3;
    if (p.ntok < want) {
      fail(&p, p.line, "'%c' request without %s", kind, p.ntok == 1 ? "an id" : "a size");
      goto done;
    }
    if (p.ntok > want || p.too_many_tokens) {
      fail(&p, p.line, "unexpected text after the '%c' request: '%s'", kind,
           show(p.tok[want], p.tok_len[want], shown, sizeof shown));
      goto done;
    }
    /* id */
    uint64_t mag;
    bool neg;
    num_status_t st = parse_number(p.tok[1], p.tok_len[1], &mag, &neg);
    if (st == NUM_GARBAGE) {
      fail(&p, p.line, "id '%s' is not a number", show(p.tok[1], p.tok_len[1], shown, sizeof shown));
      goto done;
    }
    if (st == NUM_OVERFLOW || mag > (uint64_t)INT64_MAX) {
      fail(&p, p.line, "id %s does not fit in 64 bits", show(p.tok[1], p.tok_len[1], shown, sizeof shown));
      goto done;
    }
    int64_t id = neg ? -(int64_t)mag : (int64_t)mag;
    if (st == NUM_NEGATIVE && kind != 'f') {
      fail(&p, p.line, "negative id %lld in an '%c' request (only 'f' may name one: free(NULL))",
           (long long)id, kind);
      goto done;
    }
    if (id >= 0 && (uint64_t)id >= num_ids) {
      fail(&p, p.line, "id %lld out of range (num_ids is %llu)", (long long)id,
           (unsigned long long)num_ids);
      goto done;
    }
    /* size */
    uint64_t size = 0;
    if (kind != 'f') {
      st = parse_number(p.tok[2], p.tok_len[2], &size, &neg);
      const char *s = show(p.tok[2], p.tok_len[2], shown, sizeof shown);
      if (st == NUM_GARBAGE) { fail(&p, p.line, "size '%s' is not a number", s); goto done; }
      if (st == NUM_NEGATIVE) { fail(&p, p.line, "negative size %s", s); goto done; }
      if (st == NUM_OVERFLOW) { fail(&p, p.line, "size %s does not fit in 64 bits", s); goto done; }
      if (size > TRACE_MAX_SIZE) {
        fail(&p, p.line, "size %s is larger than any heap (limit 2^48 bytes)", s);
        goto done;
      }
    }
    /* slot */
    size_t h = hash_id(id) & map.mask;
    while (map.slots[h] != UINT32_MAX && map.keys[h] != id) h = (h + 1) & map.mask;
    if (map.slots[h] == UINT32_MAX) {
      map.keys[h] = id;
      map.slots[h] = (uint32_t)t->n_slots;
      t->slot_ids[t->n_slots++] = id;
    }
    uint32_t slot = map.slots[h];

    /* Follow what the block holds, so every op can be replayed safely. */
    switch (kind) {
    case 'a':
      if (state[slot] == SLOT_LIVE) {
        fail(&p, p.line, "id %lld allocated again while live (allocated at line %u)",
             (long long)id, last_line[slot]);
        goto done;
      }
      state[slot] = SLOT_LIVE;
      cur_size[slot] = size;
      if (__builtin_add_overflow(live, size, &live)) goto live_overflow;
      t->n_alloc++;
      break;
    case 'f':
      if (state[slot] == SLOT_FREED) {
        fail(&p, p.line, "id %lld freed twice (first freed at line %u)", (long long)id,
             last_line[slot]);
        goto done;
      }
      if (state[slot] == SLOT_NULL) {
        t->n_free_null++;
      } else {
        live -= cur_size[slot];
        state[slot] = SLOT_FREED;
      }
      cur_size[slot] = 0;
      t->n_free++;
      break;
    case 'r':
      if (state[slot] == SLOT_FREED) {
        fail(&p, p.line, "realloc of id %lld after it was freed (at line %u)", (long long)id,
             last_line[slot]);
        goto done;
      }
      if (state[slot] == SLOT_NULL) t->n_realloc_null++;
      live -= cur_size[slot];
      if (size == 0 && state[slot] == SLOT_LIVE) {
        /* realloc(p, 0) frees p and leaves NULL: the id may be used again. */
        t->n_realloc_zero++;
        state[slot] = SLOT_NULL;
      } else {
        if (size == 0) t->n_realloc_zero++;
        state[slot] = SLOT_LIVE;
      }
      cur_size[slot] = size;
      if (__builtin_add_overflow(live, size, &live)) goto live_overflow;
      t->n_realloc++;
      break;
    }
    last_line[slot] = p.line;
    if (live > t->peak_live) t->peak_live = live;
    if (size > t->max_request) t->max_request = size;
    t->ops[nops++] = (trace_op_t){.size = size, .slot = slot, .line = p.line, .kind = (uint8_t)kind};
  }
  /* Lines after the last request: the classic driver never reads them. */
  for (;;) {
    int r = next_line(&p);
    if (r == 0) break;
    if (r < 0) {  /* binary junk after the requests is still junk: ignore it */
      t->stray_lines++;
      if (!t->first_stray_line) t->first_stray_line = p.line;
      continue;
    }
    if (p.ntok == 0) continue;
    t->stray_lines++;
    if (!t->first_stray_line) t->first_stray_line = p.line;
  }
  if (decide_format(&p, header, header_lines, format, t) < 0) goto done;
  memset(err, 0, sizeof *err);

  for (size_t s = 0; s < t->n_slots; s++)
    if (state[s] == SLOT_LIVE) t->n_live_at_end++;
  t->num_ops = nops;
  t->num_ids = num_ids;
  memcpy(t->header, header, sizeof t->header);
  rc = 0;
  goto done;

live_overflow:
  fail(&p, p.line, "total live payload exceeds 2^64 bytes");
done:
  free(map.keys);
  free(map.slots);
  free(state);
  free(last_line);
  free(cur_size);
  if (rc != 0) {
    trace_error_t saved = *err;
    trace_free(t);
    *err = saved;
  } else if (t->n_slots > 0) {
    int64_t *shrunk = realloc(t->slot_ids, t->n_slots * sizeof *t->slot_ids);
    if (shrunk) t->slot_ids = shrunk;
  }
  return rc;
}

int trace_load(const char *path, trace_t *t, trace_error_t *err) {
  return trace_load_as(path, TRACE_FORMAT_AUTO, t, err);
}

int trace_load_as(const char *path, int format, trace_t *t, trace_error_t *err) {
  memset(t, 0, sizeof *t);
  memset(err, 0, sizeof *err);
  /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
   * below); on a regular file it changes nothing. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    snprintf(err->msg, sizeof err->msg, "%s: cannot open: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  /* Only a regular file has an end: /dev/zero, a FIFO or a terminal would be
   * read without limit. */
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err->msg, sizeof err->msg, "%s: not a regular file (%s)", path,
             S_ISDIR(st.st_mode) ? "a directory" : S_ISCHR(st.st_mode) ? "a character device"
             : S_ISBLK(st.st_mode) ? "a block device" : S_ISFIFO(st.st_mode) ? "a pipe"
             : S_ISSOCK(st.st_mode) ? "a socket" : "not a trace");
    fclose(f);
    return -1;
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 1 << 16;
      char *nb = realloc(buf, cap);
      if (!nb) {
        snprintf(err->msg, sizeof err->msg, "%s: out of memory reading the file", path);
        free(buf);
        fclose(f);
        return -1;
      }
      buf = nb;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    /* A NUL byte: a binary (or sparse, possibly huge) file, refused where
     * it is found, before the rest is read, even after the requests (where
     * the parser would ignore it as junk). Every block is looked at, not
     * only the first: a NUL past the first 64 KiB was accepted, one before
     * it refused. */
    const char *nul = memchr(buf + len, '\0', got);
    if (nul) {
      uint32_t line = 1;
      const char *bol = buf;
      for (const char *c = buf; c < nul; c++)
        if (*c == '\n') line++, bol = c + 1;
      snprintf(err->msg, sizeof err->msg, "%s:%u: unexpected byte 0x00 in column %zu", path, line,
               (size_t)(nul - bol) + 1);
      err->line = line;
      free(buf);
      fclose(f);
      return -1;
    }
    len += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    snprintf(err->msg, sizeof err->msg, "%s: read error: %s", path, strerror(errno));
    free(buf);
    fclose(f);
    return -1;
  }
  fclose(f);
  int rc = trace_parse_buffer_as(path, buf, len, format, t, err);
  free(buf);
  return rc;
}

int trace_write(const trace_t *t, FILE *out) {
  /* Ids are written back as slots: dense and 0-based as the classic format
   * wants (slot order is the order of first use). Negative ids (free(NULL))
   * keep their value. Line 1 is at least 4 so that a reader never takes it
   * for the weight of a weighted header. */
  if (fprintf(out, "%llu\n%zu\n%zu\n1\n", (unsigned long long)(t->peak_live < 4 ? 4 : t->peak_live),
              t->n_slots, t->num_ops) < 0)
    return -1;
  for (size_t i = 0; i < t->num_ops; i++) {
    const trace_op_t *op = &t->ops[i];
    int64_t id = t->slot_ids[op->slot] < 0 ? t->slot_ids[op->slot] : (int64_t)op->slot;
    int r = op->kind == TRACE_OP_FREE
                ? fprintf(out, "f %lld\n", (long long)id)
                : fprintf(out, "%c %lld %llu\n", op->kind, (long long)id,
                          (unsigned long long)op->size);
    if (r < 0) return -1;
  }
  return fflush(out) == 0 ? 0 : -1;
}

const char *trace_basename(const trace_t *t) {
  const char *slash = t->name ? strrchr(t->name, '/') : NULL;
  return slash ? slash + 1 : (t->name ? t->name : "");
}

const char *trace_format_name(trace_format_t format) {
  switch (format) {
  case TRACE_FORMAT_CLASSIC: return "classic";
  case TRACE_FORMAT_CMU64: return "cmu64";
  case TRACE_FORMAT_WEIGHTED: return "weighted";
  }
  return "?";
}
