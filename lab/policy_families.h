/* policy_families: the lab_policy_t objects each lab/policy_<family>.c file
 * exports, declared once for policy_registry.c (which orders them) and for
 * the handout adapter (which picks one by symbol). Adding a policy is one
 * line here, its definition in the family file, and one line in the
 * registry. */
#ifndef TESSERA_LAB_POLICY_FAMILIES_H
#define TESSERA_LAB_POLICY_FAMILIES_H

#include "policy.h"

/* policy_implicit.c */
extern const lab_policy_t lab_policy_implicit_first;
extern const lab_policy_t lab_policy_implicit_next;
extern const lab_policy_t lab_policy_implicit_best;

/* policy_explicit.c */
extern const lab_policy_t lab_policy_explicit_lifo_first;
extern const lab_policy_t lab_policy_explicit_fifo_first;
extern const lab_policy_t lab_policy_explicit_addr_first;
extern const lab_policy_t lab_policy_explicit_lifo_best;
extern const lab_policy_t lab_policy_explicit_addr_best;

/* policy_segregated.c */
extern const lab_policy_t lab_policy_segregated_pow2_first;
extern const lab_policy_t lab_policy_segregated_pow2_best;
extern const lab_policy_t lab_policy_segregated_fine_first;
extern const lab_policy_t lab_policy_segregated_fine_best;
extern const lab_policy_t lab_policy_segregated_deferred;
extern const lab_policy_t lab_policy_segregated_split64;
extern const lab_policy_t lab_policy_segregated_min32;
extern const lab_policy_t lab_policy_segregated_nofooter;
extern const lab_policy_t lab_policy_segregated_realloc;
extern const lab_policy_t lab_policy_segregated_apart;

/* policy_tree.c */
extern const lab_policy_t lab_policy_tree_best;
extern const lab_policy_t lab_policy_tree_best_apart;

#endif
