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

/* One line on stderr: the parts, then a newline, with write(2): stdio could
 * move the program break under us, and these run when something is already
 * wrong. A line longer than the buffer is cut. */
static void write_line(const char *const *parts, size_t count) {
  char line[200];
  size_t n = 0;
  for (size_t i = 0; i < count; i++)
    for (const char *s = parts[i]; *s && n < sizeof line - 1; s++) line[n++] = *s;
  line[n++] = '\n';
  ssize_t ignored = write(2, line, n);
  (void)ignored;
}

/* "tessera fit: ignoring NAME="VALUE": expected ...; using ...". */
void fit_warn_env(const char *name, const char *value, const char *expected) {
  const char *parts[] = {"tessera fit: ignoring ", name, "=\"", value, "\": expected ", expected};
  write_line(parts, sizeof parts / sizeof parts[0]);
}

/* "tessera fit: WHO(0x...): WHY". */
void fit_report_bad_free(const char *who, const void *ptr, const char *why) {
  uintptr_t v = (uintptr_t)ptr;
  char hex[2 * sizeof v + 1];
  size_t h = sizeof hex - 1;
  hex[h] = '\0';
  do {
    hex[--h] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v && h > 0);
  const char *parts[] = {"tessera fit: ", who, "(0x", hex + h, "): ", why};
  write_line(parts, sizeof parts / sizeof parts[0]);
}
