/* trace: the malloc-lab trace reader and writer.
 *
 * Owns the in-memory form of a trace (trace_t) and its only two ways in:
 * trace_parse_buffer() (a byte buffer, so a fuzzer can drive it) and
 * trace_load() (a file, read whole, then parsed). trace_write() emits the
 * classic header format. Callers: lab/driver.c (replay), lab/tracegen.c
 * (generated traces), tools/cmd_lab.c, the lab tests.
 *
 * Formats: four header lines, then `a id size`, `f id`, `r id size` requests.
 * Line 1 is a suggested heap size (classic) or a weight 0-3 (the weighted
 * 64-bit variants); line 4 is the classic weight, the CMU 64-bit peak payload
 * or the other variant's 0/1 flag. Tolerated: CRLF, trailing blanks, blank
 * lines, `f` of an id never allocated or of a negative id (free(NULL)), `r`
 * of an id holding NULL (realloc(NULL, n)), `r id 0`, blocks never freed,
 * and lines after the num_ops-th request (counted, ignored). Rejected with
 * `file:line: what is wrong`: everything else.
 *
 * Invariants of a parsed trace: ops[] holds exactly num_ops requests; every
 * op's slot is < n_slots; ids are renumbered densely into slots (slot_ids[]
 * gives the id back for messages), so memory is bounded by the file size and
 * never by the numbers written in it; no op refers to a freed block. */
#ifndef TESSERA_LAB_TRACE_H
#define TESSERA_LAB_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum trace_format_e {
  TRACE_FORMAT_CLASSIC,   /* heap size, num_ids, num_ops, weight (ignored) */
  TRACE_FORMAT_CMU64,     /* weight 0-3, num_ids, num_ops, peak live payload */
  TRACE_FORMAT_WEIGHTED,  /* weight 0-3, num_ids, num_ops, 0/1 skip-overlap flag */
} trace_format_t;

/* For trace_parse_buffer_as/trace_load_as: tell the header from its values
 * (line 1 above 3: classic; else line 4 0/1 and not the trace's peak:
 * weighted, with header_guessed set; else cmu64). */
#define TRACE_FORMAT_AUTO (-1)

typedef enum trace_op_kind_e {
  TRACE_OP_ALLOC = 'a',
  TRACE_OP_FREE = 'f',
  TRACE_OP_REALLOC = 'r',
} trace_op_kind_t;

typedef struct trace_op_s {
  uint64_t size;   /* requested bytes (0 for frees) */
  uint32_t slot;   /* dense block index, < trace_t.n_slots */
  uint32_t line;   /* 1-based line in the file, for messages */
  uint8_t kind;    /* trace_op_kind_t */
} trace_op_t;

typedef struct trace_s {
  char *name;               /* as given to the parser (path or label) */
  trace_format_t format;
  uint64_t header[4];       /* the four header values as written */
  uint64_t num_ids;         /* header line 2 */
  int weight;               /* 0-3 (classic traces: 1) */
  bool header_guessed;      /* read as weighted, but a classic header (heap size
                               0-3, weight 0/1) is the same text */
  trace_op_t *ops;
  size_t num_ops;
  int64_t *slot_ids;        /* slot -> id as written in the file */
  size_t n_slots;
  /* Statistics computed while parsing. */
  uint64_t peak_live;       /* largest total of live requested bytes */
  uint64_t max_request;
  size_t n_alloc, n_free, n_realloc;
  size_t n_free_null;       /* f of an id holding NULL (or a negative id) */
  size_t n_realloc_null;    /* r of an id holding NULL */
  size_t n_realloc_zero;    /* r id 0 */
  size_t n_live_at_end;     /* blocks never freed */
  size_t stray_lines;       /* non-blank lines after the last request */
  uint32_t first_stray_line;
} trace_t;

/* Longest message, e.g. "path/to/x.rep:12: unknown request 'q'". */
#define TRACE_ERR_MAX 512

typedef struct trace_error_s {
  char msg[TRACE_ERR_MAX];  /* "name:line: what is wrong" */
  uint32_t line;            /* 0 when the error is not about one line */
} trace_error_t;

/* Parse len bytes of buf (need not be NUL-terminated). On success fills
 * *trace (free with trace_free) and returns 0; on a malformed trace returns
 * -1 with err->msg set and *trace left empty. Never reads outside buf. */
int trace_parse_buffer(const char *name, const char *buf, size_t len,
                       trace_t *trace, trace_error_t *err);

/* The same, with the header's format given (TRACE_FORMAT_CLASSIC, _CMU64,
 * _WEIGHTED) or TRACE_FORMAT_AUTO. A forced weighted format still checks
 * its values: a weight 0-3 on line 1, and for _WEIGHTED a 0/1 line 4. */
int trace_parse_buffer_as(const char *name, const char *buf, size_t len, int format,
                          trace_t *trace, trace_error_t *err);

/* Read and parse a file; errors (including I/O) come back as for
 * trace_parse_buffer, naming the path. Only a regular file is read (not
 * /dev/zero, a FIFO, a directory), and a NUL byte anywhere stops the reading
 * where it is found ("path:line: unexpected byte 0x00 ..."). */
int trace_load(const char *path, trace_t *trace, trace_error_t *err);
int trace_load_as(const char *path, int format, trace_t *trace, trace_error_t *err);

void trace_free(trace_t *trace);

/* Write trace in the classic header format (line 1 = the peak live payload
 * as suggested heap size, line 4 = weight 1). Returns 0, or -1 with errno. */
int trace_write(const trace_t *trace, FILE *out);

/* The name without directories, for tables. */
const char *trace_basename(const trace_t *trace);

const char *trace_format_name(trace_format_t format);

#endif
