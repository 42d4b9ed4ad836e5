/* preload.c: can a library go into LD_PRELOAD? (see preload.h) */
#include "preload.h"

#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool preload_resolve(const char *path, char *out, size_t size) {
  char resolved[PATH_MAX];
  if (access(path, R_OK) != 0 || realpath(path, resolved) == NULL) return false;
  if (snprintf(out, size, "%s", resolved) >= (int)size) {
    errno = ENAMETOOLONG;
    return false;
  }
  return true;
}

/* An ELF shared object of this machine's class (ET_DYN; a PIE executable
 * is one too, and the loader says so). NULL, or why not. */
static const char *not_a_shared_object(const char *path) {
  unsigned char ident[EI_NIDENT + 2];
  FILE *f = fopen(path, "rb");
  if (!f) return strerror(errno);
  size_t got = fread(ident, 1, sizeof ident, f);
  fclose(f);
  if (got < sizeof ident || memcmp(ident, ELFMAG, SELFMAG) != 0) return "not an ELF file";
  if (ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32))
    return "an ELF file of the other word size";
  /* e_type follows e_ident, in the file's byte order. */
  unsigned type = ident[EI_DATA] == ELFDATA2MSB ? (unsigned)ident[EI_NIDENT] << 8 | ident[EI_NIDENT + 1]
                                                : (unsigned)ident[EI_NIDENT + 1] << 8 | ident[EI_NIDENT];
  return type == ET_DYN ? NULL : "an ELF file but not a shared object";
}

const char *preload_problem(const char *path) {
  /* ld.so splits LD_PRELOAD at spaces and colons, so such a path would be
   * looked up in pieces, skipped, and the program run on glibc. */
  if (strpbrk(path, " :"))
    return "its path contains a space or a colon, where the dynamic loader splits LD_PRELOAD "
           "(move it, or link it from a path without them)";
  return not_a_shared_object(path);
}
