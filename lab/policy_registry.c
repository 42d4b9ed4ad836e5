/* policy_registry: the one list of lab policies, in textbook order, so that
 * `tessera lab --compare` reads as the progression from the implicit list to
 * Tessera's best policy. The driver (tools/cmd_lab.c), the tests and
 * --list-policies all go through lab_policies(); names must stay unique. */
#include "policy_families.h"

#include <string.h>

static const lab_policy_t *const policies[] = {
  &lab_policy_implicit_first,
  &lab_policy_implicit_next,
  &lab_policy_implicit_best,
  &lab_policy_explicit_lifo_first,
  &lab_policy_explicit_fifo_first,
  &lab_policy_explicit_addr_first,
  &lab_policy_explicit_lifo_best,
  &lab_policy_explicit_addr_best,
  &lab_policy_segregated_pow2_first,
  &lab_policy_segregated_pow2_best,
  &lab_policy_segregated_fine_first,
  &lab_policy_segregated_fine_best,
  &lab_policy_segregated_deferred,
  &lab_policy_segregated_split64,
  &lab_policy_segregated_min32,
  &lab_policy_segregated_nofooter,
  &lab_policy_segregated_realloc,
  &lab_policy_segregated_apart,
  &lab_policy_tree_best,
  &lab_policy_tree_best_apart,
  NULL,
};

const lab_policy_t *const *lab_policies(void) { return policies; }

const lab_policy_t *lab_policy_find(const char *name) {
  if (!name) return NULL;
  for (const lab_policy_t *const *p = policies; *p; p++)
    if (!strcmp((*p)->name, name)) return *p;
  return NULL;
}

/* The best policy: highest perf index on the classic traces (docs/LAB.md). */
const lab_policy_t *lab_policy_default(void) { return &lab_policy_segregated_apart; }
