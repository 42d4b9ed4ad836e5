/* A student's mm.c with a classic bug, for `tessera lab --mm` (tests/lab/
 * student_mm.sh): a bump allocator whose realloc copies one byte too few;
 * with -DOVERLAP, whose third block overlaps the second; with
 * -DPAST_BREAK, which writes a word a page past the break (an epilogue put
 * in the wrong place); with -DASSERT_FAIL, whose own consistency check
 * (an assert) fails on the second block; with -DLOOP, whose second malloc
 * never returns; with -DEXIT_CALL, which calls exit(0) on the second
 * malloc (a student's "give up" path). Built with the mock handout's
 * memlib.h (tests/lab/handout). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "memlib.h"
#include "mm.h"

team_t team = {"broken", "A Student", "student@example.edu", "", ""};

#define ALIGN8(n) (((n) + 7) & ~(size_t)7)

static int blocks;

int mm_init(void) {
  blocks = 0;
  return 0;
}

void *mm_malloc(size_t size) {
  char *p = mem_sbrk((int)(ALIGN8(size) + 8));
  if (p == (void *)-1) return NULL;
  memcpy(p, &size, sizeof size);
#ifdef ASSERT_FAIL
  assert(++blocks < 2 && "the student's own heap check");
#endif
#ifdef LOOP
  if (++blocks == 2)
    for (volatile int spin = 1; spin;) {
    }
#endif
#ifdef EXIT_CALL
  if (++blocks == 2) exit(0);
#endif
#ifdef PAST_BREAK
  if (++blocks == 2) memcpy((char *)mem_heap_hi() + 1 + 4096, &size, sizeof size);
#endif
#ifdef OVERLAP
  if (++blocks == 3) return p - 8; /* into the previous block's payload */
#endif
  return p + 8;
}

void mm_free(void *ptr) { (void)ptr; }

void *mm_realloc(void *ptr, size_t size) {
  void *q = mm_malloc(size);
  if (ptr == NULL || q == NULL) return q;
  size_t old;
  memcpy(&old, (char *)ptr - 8, sizeof old);
  memcpy(q, ptr, (old < size ? old : size) - 1); /* the bug: one byte short */
  return q;
}
