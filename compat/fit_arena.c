/* fit_arena.c — the out-of-line instances of fit_arena.h (index kind read
 * from the arena, or fixed to the size bins), choosing an arena's index on first use, and reporting bad
 * frees.
 */
#include "fit_arena.h"

#include <unistd.h>

void fit_arena_prepare(fit_arena_t *a) {
  if (a->index_kind != FIT_INDEX_NONE) return;
  fit_register_fork_handlers();
  if (fit_use_naive())
    a->index_kind = FIT_INDEX_LIST;
  else
    a->index_kind = a->policy == FIT_FIRST_FIT ? FIT_INDEX_ADDR_TREE : FIT_INDEX_SIZE_BINS;
}

void *fit_arena_malloc(fit_arena_t *a, size_t size) { return fit_arena_malloc_k(a, size, a->index_kind); }

void fit_arena_free(fit_arena_t *a, fit_block_t *b) { fit_arena_free_k(a, b, a->index_kind); }

/* The same for an arena known to use the size bins (bf_ and ts_nolock's slow
 * paths): the index switch folds away and the bin operations are inlined. */
void *fit_bins_arena_malloc(fit_arena_t *a, size_t size) { return fit_arena_malloc_k(a, size, FIT_INDEX_SIZE_BINS); }

void fit_bins_arena_free(fit_arena_t *a, fit_block_t *b) { fit_arena_free_k(a, b, FIT_INDEX_SIZE_BINS); }

/* Writes "tessera fit: WHO(0x...): WHY\n" with write(2): stdio could move the
 * program break under us, and this runs when something is already wrong. */
/* One line on stderr for an environment variable with a value it does not
 * take: "tessera fit: ignoring NAME=VALUE: expected ...; using ...". */
void fit_warn_env(const char *name, const char *value, const char *expected) {
  char line[200];
  size_t n = 0;
  const char *parts[] = {"tessera fit: ignoring ", name, "=\"", value, "\": expected ", expected, "\n"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    for (const char *s = parts[i]; *s && n < sizeof line - 2; s++) line[n++] = *s;
  if (line[n - 1] != '\n') line[n++] = '\n';
  ssize_t ignored = write(2, line, n);
  (void)ignored;
}

void fit_report_bad_free(const char *who, const void *ptr, const char *why) {
  char line[160];
  size_t n = 0;
  const char *parts[] = {"tessera fit: ", who, "(0x"};
  for (size_t i = 0; i < 3; i++)
    for (const char *s = parts[i]; *s && n < sizeof line - 40; s++) line[n++] = *s;
  uintptr_t v = (uintptr_t)ptr;
  char hex[2 * sizeof v];
  size_t h = 0;
  do {
    hex[h++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v && h < sizeof hex);
  while (h) line[n++] = hex[--h];
  line[n++] = ')';
  line[n++] = ':';
  line[n++] = ' ';
  for (const char *s = why; *s && n < sizeof line - 1; s++) line[n++] = *s;
  line[n++] = '\n';
  ssize_t ignored = write(2, line, n);
  (void)ignored;
}
