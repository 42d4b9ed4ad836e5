/* The lab policy interface: every textbook allocator in lab/ is one module
 * exporting one lab_policy_t, listed once in policy_registry.c. The driver
 * (tools/cmd_lab.c) and the unit tests only talk to policies through this.
 *
 * Contract shared by all policies:
 *  - memory comes only from mem_sbrk() (lab/memlib.h); never libc malloc;
 *  - init() rebuilds all state from scratch on an empty heap (the driver calls
 *    mem_reset_brk() and then init() before every pass);
 *  - every payload is aligned to the alignment given to init (8 or 16);
 *  - malloc(0) returns NULL (malloc-lab convention); malloc returns NULL when
 *    mem_sbrk fails, never crashes;
 *  - free(NULL) is a no-op; realloc(NULL, n) == malloc(n); realloc(p, 0)
 *    frees p and returns NULL;
 *  - check() verifies every invariant of the policy and returns 0, or writes
 *    a one-line description of the first violation into err and returns -1. */
#ifndef TESSERA_LAB_POLICY_H
#define TESSERA_LAB_POLICY_H

#include <stddef.h>

typedef struct lab_policy_s {
  const char *name;         /* e.g. "implicit-first"; unique, used on the command line */
  const char *description;  /* one line for --list-policies */
  int (*init)(size_t align);             /* 0 on success, -1 on failure */
  void *(*malloc)(size_t size);
  void (*free)(void *ptr);
  void *(*realloc)(void *ptr, size_t size);
  int (*check)(char *err, size_t errlen);
} lab_policy_t;

/* All policies, in textbook order; NULL-terminated. */
const lab_policy_t *const *lab_policies(void);
/* Look a policy up by name; NULL when there is none. */
const lab_policy_t *lab_policy_find(const char *name);
/* The policy that runs when the user names none: the best one. */
const lab_policy_t *lab_policy_default(void);

#endif
