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
const lab_policy_t *lab_policy_default(void) { return &lab_policy_implicit_first; }
