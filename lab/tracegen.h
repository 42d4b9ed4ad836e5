/* tracegen: seeded generator of malloc-lab traces in the classic stress
 * patterns, so the lab's tests and its default demo stand on their own data.
 *
 * A pattern turns (seed, ops, max_size, chains) into a request sequence;
 * the same parameters always give the same bytes (the generator has its own
 * PRNG and never looks at the clock or the environment). Every generated
 * trace is balanced, uses each id for one block, and is written in the
 * classic header format; tracegen_trace() parses it back with trace.c, so a
 * generated trace is exactly what a file holding the text would give.
 * Callers: tools/cmd_lab.c (`tessera lab gen`, the default demo), tests. */
#ifndef TESSERA_LAB_TRACEGEN_H
#define TESSERA_LAB_TRACEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef struct tracegen_params_s {
  uint64_t seed;
  size_t ops;         /* about this many requests; 0 = the pattern's default */
  uint64_t max_size;  /* largest request; 0 = the pattern's default */
  unsigned chains;    /* realloc pattern: interleaved growth chains; 0 = 4 */
} tracegen_params_t;

typedef struct tracegen_pattern_s {
  const char *name;
  const char *description;  /* one line for --help */
} tracegen_pattern_t;

/* The patterns of the demo and of `gen all`, terminated by an entry whose
 * name is NULL. */
const tracegen_pattern_t *tracegen_patterns(void);
/* Patterns generated only when named (`gen largemem`): replaying them needs
 * tens of GiB of heap address space (MAP_NORESERVE, barely touched), which
 * the demo should not ask of every machine. Terminated the same way. */
const tracegen_pattern_t *tracegen_named_only_patterns(void);

/* Generate the trace text (classic header + requests) into a malloc'd
 * buffer. Returns 0, or -1 with a message in err (unknown pattern, out of
 * memory, parameters out of range). */
int tracegen_text(const char *pattern, const tracegen_params_t *params, char **text,
                  size_t *len, char *err, size_t errlen);

/* Generate and parse: *trace is named "<pattern>-s<seed>". */
int tracegen_trace(const char *pattern, const tracegen_params_t *params, trace_t *trace,
                   char *err, size_t errlen);

#endif
