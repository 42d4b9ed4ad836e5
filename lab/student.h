/* student.h — a student's malloc-lab mm.c, built as a shared object, as a
 * lab policy (lab/student.c). */
#ifndef TESSERA_LAB_STUDENT_H
#define TESSERA_LAB_STUDENT_H

#include <stddef.h>

#include "policy.h"

/* Load the shared object at path (it must contain a '/'); the policy is
 * named "mm:<file name>". NULL with a one-line reason in err. */
const lab_policy_t *lab_student_load(const char *path, char *err, size_t errlen);

#endif
