/* student.c — a student's malloc-lab mm.c as a lab policy (`tessera lab
 * --mm mm.so`): the shared object exports the handout's interface
 * (mm_init, mm_malloc, mm_free, mm_realloc) and calls the handout's memlib
 * (mem_sbrk(int), mem_heap_lo, ...), which the `tessera` program exports
 * from the lab's memlib (tools/lab_exports.list). So a student grades the
 * code they will hand in with the driver's checks (overlap, alignment,
 * payload contents, heap bounds) and scores, without the handout's
 * mdriver. The student's own heap checker is not called: its signature
 * differs between handouts (int mm_check(void), void mm_checkheap(int)). */
#include "student.h"

#include "memlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The handout's mem_sbrk: an int increment (sign-extended, so a negative
 * one is refused as the handout's is). Exported for the student's code. */
#undef mem_sbrk
void *mem_sbrk(int incr);
void *mem_sbrk(int incr) { return lab_mem_sbrk((intptr_t)incr); }

static struct {
  int (*init)(void);
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*realloc)(void *, size_t);
  char name[96], description[320];
  lab_policy_t policy;
} student;

static int student_init(size_t align) {
  (void)align; /* the student's ALIGNMENT is compiled in; the driver checks it */
  return student.init() < 0 ? -1 : 0;
}
static void *student_malloc(size_t size) { return student.malloc(size); }
static void student_free(void *p) { student.free(p); }
static void *student_realloc(void *p, size_t size) { return student.realloc(p, size); }

const lab_policy_t *lab_student_load(const char *path, char *err, size_t errlen) {
  if (student.policy.name != NULL) {
    snprintf(err, errlen, "only one --mm per run");
    return NULL;
  }
  /* A bare name would be searched for in the library path, not the
   * current directory: say what to write. */
  if (strchr(path, '/') == NULL) {
    snprintf(err, errlen, "%s: give a path (./%s), as dlopen searches the library path for a bare name", path,
             path);
    return NULL;
  }
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (so == NULL) {
    snprintf(err, errlen, "%s", dlerror());
    return NULL;
  }
  static const char *const names[] = {"mm_init", "mm_malloc", "mm_free", "mm_realloc"};
  void *fn[4];
  for (int i = 0; i < 4; i++)
    if ((fn[i] = dlsym(so, names[i])) == NULL) {
      snprintf(err, errlen, "%s: does not define %s (build it from the mm.c of a malloc-lab handout)", path,
               names[i]);
      dlclose(so);
      return NULL;
    }
  /* A student object with its own memlib would grow a heap the driver does
   * not see: every block would be reported outside the heap. Say why. */
  void *own = dlsym(so, "mem_sbrk"); /* found in the object or its libraries, not in this program */
  if (own != NULL && own != (void *)mem_sbrk) {
    snprintf(err, errlen, "%s: defines its own mem_sbrk: build the shared object from mm.c alone "
             "(tessera provides memlib)", path);
    dlclose(so);
    return NULL;
  }
  student.init = (int (*)(void))fn[0];
  student.malloc = (void *(*)(size_t))fn[1];
  student.free = (void (*)(void *))fn[2];
  student.realloc = (void *(*)(void *, size_t))fn[3];
  const char *base = strrchr(path, '/') + 1;
  snprintf(student.name, sizeof student.name, "mm:%s", base);
  snprintf(student.description, sizeof student.description, "a malloc-lab mm.c loaded from %s", path);
  student.policy = (lab_policy_t){.name = student.name, .description = student.description,
                                  .init = student_init, .malloc = student_malloc, .free = student_free,
                                  .realloc = student_realloc, .check = NULL};
  return &student.policy;
}
