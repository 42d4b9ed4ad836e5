/* Whether a shared object can really be preloaded, for `tessera run` and
 * `tessera bench --allocator`. The dynamic loader skips a preload it cannot
 * use with only a warning, and the program then runs on the C library's
 * malloc as if all were well: so both commands refuse such a library before
 * starting anything. */
#ifndef TESSERA_TOOLS_PRELOAD_H
#define TESSERA_TOOLS_PRELOAD_H

#include <stdbool.h>
#include <stddef.h>

/* The absolute path of a readable file in out; false with errno set when
 * it cannot be read. */
bool preload_resolve(const char *path, char *out, size_t size);

/* NULL when the file at (absolute) path can go into LD_PRELOAD as it is,
 * else why not: not an ELF shared object of this machine's word size, or a
 * path the loader would split. */
const char *preload_problem(const char *path);

#endif
