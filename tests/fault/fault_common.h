/* fault_common.h — helpers shared by the fault-injection tests (C and C++).
 *
 * Every test keeps a set of live blocks, each filled with a pattern derived
 * from its own seed, and checks after every injected failure that each block
 * still holds exactly that pattern: an allocator that loses or overwrites
 * memory while recovering from an OS failure is caught here. CHECK() prints
 * file:line and the failed expression and exits 1, so CTest shows what broke.
 * Used by fault_test.c and fault_cxx_test.cpp only. */
#ifndef TESSERA_TESTS_FAULT_COMMON_H
#define TESSERA_TESTS_FAULT_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s (errno=%d)\n", __FILE__,        \
              __LINE__, #cond, errno);                                         \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

typedef struct fault_block_s {
  unsigned char *ptr;
  size_t size;
  uint32_t seed;
} fault_block_t;

/* The byte at offset i of a block with this seed: cheap, and differs
 * between neighbouring blocks and neighbouring offsets. */
static inline unsigned char fault_pattern_byte(uint32_t seed, size_t i) {
  return (unsigned char)((seed * 2654435761u) >> 24 ^ (uint32_t)(i * 131u + (i >> 8)));
}

static inline void fault_fill(const fault_block_t *b) {
  for (size_t i = 0; i < b->size; i++) b->ptr[i] = fault_pattern_byte(b->seed, i);
}

/* True when the first `len` bytes of the block still hold its pattern. */
static inline bool fault_prefix_intact(const fault_block_t *b, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (b->ptr[i] != fault_pattern_byte(b->seed, i)) return false;
  return true;
}

static inline bool fault_intact(const fault_block_t *b) {
  return fault_prefix_intact(b, b->size);
}

#endif
