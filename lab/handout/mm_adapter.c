/* mm_adapter: the malloc-lab handout interface (mm.h) over one lab policy,
 * so a lab policy can be graded by a handout's own mdriver, unchanged.
 *
 * Build: compile this file together with the policy's family file
 * (lab/policy_<family>.c) with -DLAB_POLICY=<the policy's symbol>, e.g.
 * -DLAB_POLICY=lab_policy_tree_best_apart; or let make_mm.sh paste everything
 * into one self-contained mm.c. The policy then uses the handout's own
 * memlib.h: only mem_sbrk (with an int increment), mem_heap_lo, mem_heap_hi
 * and mem_heapsize, which every handout has.
 *
 * mm_init rebuilds all of the policy's state on every call, as the mdriver
 * calls it once per trace after mem_reset_brk(). LAB_ALIGN (default 8, the
 * classic handout's ALIGNMENT) may be set to 16. Define LAB_HANDOUT_TEAM for
 * the classic CS:APP handout, whose mm.h declares `extern team_t team`. */
#include "memlib.h"
#include "mm.h"
#include "policy.h"

#include <stdio.h>

#ifndef LAB_POLICY
#error "compile with -DLAB_POLICY=lab_policy_<name> (see lab/policy_families.h)"
#endif
#ifndef LAB_ALIGN
#define LAB_ALIGN 8
#endif

extern const lab_policy_t LAB_POLICY;

#ifdef LAB_HANDOUT_TEAM
team_t team = {
  "tessera",                     /* team name */
  "Tessera lab policy",          /* first member's full name */
  "tessera",                     /* first member's login */
  "",                            /* second member's full name */
  "",                            /* second member's login */
};
#endif

int mm_init(void) { return LAB_POLICY.init(LAB_ALIGN) == 0 ? 0 : -1; }

void *mm_malloc(size_t size) { return LAB_POLICY.malloc(size); }

void mm_free(void *ptr) { LAB_POLICY.free(ptr); }

void *mm_realloc(void *ptr, size_t size) { return LAB_POLICY.realloc(ptr, size); }

/* The heap checker, for a student's own debugging: 0 when consistent,
 * otherwise prints the first violation and returns -1. */
int mm_check(void) {
  char err[256];
  if (LAB_POLICY.check(err, sizeof err) == 0) return 0;
  fprintf(stderr, "mm_check (%s): %s\n", LAB_POLICY.name, err);
  return -1;
}
